//! Our chart against upstream's, with upstream's own inputs. tests/chart/upstream holds upstream Reloader
//! v1.4.21's chart (2.2.16): its default values.yaml, common overrides (cases/) and what it renders for each
//! (rendered/, release names `reloader` and `rl`), and its static manifest. Our chart renders the same values
//! file plus each case for both release names, and `compare` lists every difference in what decides the
//! installed behaviour (objects, container args/env/image/probes, replicas, pull secrets, RBAC verbs). Each
//! difference must match an entry of ALLOWED, each entry is a row of the "Differences from upstream" table in
//! deploy/helm/reloader/README.md, and an entry that no case needs any more fails as well.

#[allow(unused_imports)] // the controller helpers of common are not used here
mod common;
#[path = "chart_fixtures/compare.rs"]
mod compare;
#[path = "chart_fixtures/values.rs"]
mod values;

use std::{collections::BTreeSet, path::PathBuf};

use common::chart::*;
use compare::{Names, differences, glob};
use serde_json::{Value, json};

const RELEASES: [&str; 2] = ["reloader", "rl"];

/// A difference from upstream that is intended: its id in the README's table, and the lines it allows.
struct Allowed {
    id: &'static str,
    lines: &'static [&'static str],
}

/// Every intended difference of the chart's renders (see the README's table for the reasons).
const ALLOWED: &[Allowed] = &[
    Allowed {
        id: "ns-options-need-global",
        lines: &["render: fails: *reloader.ignoreNamespaces and reloader.namespaceSelector only apply when*"],
    },
    Allowed {
        id: "image",
        lines: &[
            "image: upstream ghcr.io/stakater/reloader:v1.4.21, ours ghcr.io/reloader-rs/reloader:{appVersion}",
            "image: upstream registry.internal/stakater/reloader:v1.4.21, ours registry.internal/reloader-rs/reloader:{appVersion}",
        ],
    },
    Allowed { id: "readiness-probe", lines: &["readinessProbe.httpGet.path: upstream /metrics, ours /readyz"] },
    Allowed {
        id: "go-runtime-env",
        lines: &[
            r#"env GOMAXPROCS: upstream {"resourceFieldRef":{"divisor":"1","resource":"limits.cpu"}}, ours -"#,
            r#"env GOMEMLIMIT: upstream {"resourceFieldRef":{"divisor":"1","resource":"limits.memory"}}, ours -"#,
        ],
    },
    Allowed {
        id: "is-openshift-flag",
        lines: &["arg --is-openshift=false: only ours", "arg --is-openshift=true: only ours"],
    },
    Allowed {
        id: "namespace-selector-quotes",
        lines: &[
            r#"arg --namespace-selector="team=a,env!=dev": only upstream"#,
            "arg --namespace-selector=team=a,env!=dev: only ours",
        ],
    },
    Allowed { id: "pod-token", lines: &["pod automountServiceAccountToken: upstream -, ours true"] },
    Allowed {
        id: "rbac-no-get",
        lines: &[
            "rbac * {fullname}-role: /configmaps: upstream [get list watch], ours [list watch]",
            "rbac * {fullname}-role: /secrets: upstream [get list watch], ours [list watch]",
            "rbac ClusterRole {fullname}-role: /namespaces: upstream [get list watch], ours [list watch]",
            "rbac * {fullname}-role: secrets-store.csi.x-k8s.io/secretproviderclass*: upstream [get list watch], ours [list watch]",
        ],
    },
    Allowed {
        id: "rbac-workloads",
        lines: &["rbac * {fullname}-role: apps/*: upstream [get list patch update], ours [list patch watch]"],
    },
    Allowed {
        id: "rbac-batch",
        lines: &[
            "rbac * {fullname}-role: batch/cronjobs: upstream [get list], ours [get list patch watch]",
            "rbac * {fullname}-role: batch/jobs: upstream [create delete get list], ours [create delete get list patch watch]",
        ],
    },
    Allowed {
        id: "rbac-ignored-kinds",
        lines: &[
            "rbac * {fullname}-role: batch/cronjobs: upstream [get list], ours -",
            "rbac * {fullname}-role: batch/jobs: upstream [create delete get list], ours -",
        ],
    },
    Allowed {
        id: "rbac-events",
        lines: &[
            "rbac * {fullname}-role: /events: upstream [create patch], ours -",
            "rbac * {fullname}-role: events.k8s.io/events: upstream -, ours [create patch]",
        ],
    },
    Allowed {
        id: "rbac-optional-kinds",
        lines: &[
            "rbac * {fullname}-role: argoproj.io/rollouts: upstream -, ours [get list patch watch]",
            "rbac * {fullname}-role: apps.openshift.io/deploymentconfigs: upstream -, ours [get list patch watch]",
        ],
    },
    Allowed {
        id: "rbac-leases",
        lines: &[
            "object Role */{fullname}-leader-election: only ours",
            "object RoleBinding */{fullname}-leader-election: only ours",
            "rbac ClusterRole {fullname}-role: coordination.k8s.io/leases: upstream [create get update], ours -",
            "rbac Role {fullname}-leader-election: coordination.k8s.io/leases: upstream -, ours [create get update]",
        ],
    },
    Allowed {
        id: "rbac-meta-info",
        lines: &[
            "rbac Role {fullname}-metadata-role: /configmaps: upstream [create get list update watch], ours [create patch[reloader-meta-info]]",
        ],
    },
    Allowed {
        id: "rbac-owed-jobs",
        lines: &[
            "object Role reloader/{fullname}-owed-jobs-role: only ours",
            "object RoleBinding reloader/{fullname}-owed-jobs-role-binding: only ours",
            "rbac Role {fullname}-owed-jobs-role: /secrets: upstream -, ours [create get[reloader-owed-jobs] patch[reloader-owed-jobs]]",
        ],
    },
];

/// The differences between upstream's static manifest and deploy/kubernetes/reloader.yaml, by object.
const STATIC_ALLOWED: [Allowed; 2] = [
    Allowed {
        id: "static-metadata-rolebinding",
        lines: &[
            "object RoleBinding default/reloader-reloader-metadata-role-binding: only ours",
            "object RoleBinding default/reloader-reloader-metadata-rolebinding: only upstream",
        ],
    },
    Allowed {
        id: "static-owed-jobs-role",
        lines: &[
            "object Role default/reloader-reloader-owed-jobs-role: only ours",
            "object RoleBinding default/reloader-reloader-owed-jobs-role-binding: only ours",
        ],
    },
];

fn fixtures() -> PathBuf {
    repo().join("tests/chart/upstream")
}

fn path_arg(path: PathBuf) -> String {
    path.display().to_string()
}

/// The case names: `default` (upstream's values.yaml alone) and one per file in cases/.
fn cases() -> Vec<String> {
    let dir = fixtures().join("cases");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".yaml").map(str::to_owned)).collect();
    names.sort();
    names.insert(0, "default".into());
    names
}

/// Our chart with upstream's values.yaml and the case's overrides, as `helm template` args; then the image keys
/// a migrating user sets when the chart refuses upstream's image (tests/chart/our-image.yaml; the refusal itself
/// is `packaging.rs`'s).
fn values_args(case: &str) -> Vec<String> {
    let mut args = vec!["--values".into(), path_arg(fixtures().join("values.yaml"))];
    if case != "default" {
        args.extend(["--values".into(), path_arg(fixtures().join(format!("cases/{case}.yaml")))]);
    }
    args.extend(["--values".into(), path_arg(repo().join("tests/chart/our-image.yaml"))]);
    args
}

fn app_version() -> String {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml");
    let chart: Value = serde_saphyr::from_str(&text).expect("Chart.yaml is YAML");
    chart["appVersion"].as_str().expect("appVersion").to_owned()
}

/// The difference lines `allowed` does not cover, and the allowed lines that matched.
fn unexplained(lines: &BTreeSet<String>, allowed: &[&Allowed]) -> (Vec<String>, BTreeSet<&'static str>) {
    let mut used = BTreeSet::new();
    let mut left = Vec::new();
    for line in lines {
        let hits: Vec<&'static str> =
            allowed.iter().flat_map(|a| a.lines.iter().copied()).filter(|p| glob(p, line)).collect();
        if hits.is_empty() {
            left.push(line.clone());
        }
        used.extend(hits);
    }
    (left, used)
}

#[test]
fn our_chart_renders_upstreams_objects_flags_and_rbac_except_the_listed_differences() {
    let app_version = app_version();
    let allowed: Vec<&Allowed> = ALLOWED.iter().collect();
    let mut failures = Vec::new();
    let mut used = BTreeSet::new();
    let cases = cases();
    assert!(cases.len() >= 10, "the fixture cases are missing: {cases:?}");
    for case in &cases {
        for release in RELEASES {
            let file = fixtures().join(format!("rendered/{release}.{case}.yaml"));
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let upstream = parse_documents(&text);
            let args = values_args(case);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let lines = match template_text(release, "reloader", &args) {
                Ok(text) => {
                    let names = Names { fullname: &format!("{release}-reloader"), app_version: &app_version };
                    differences(&upstream, &parse_documents(&text), &names)
                }
                Err(e) => BTreeSet::from([format!("render: fails: {}", e.replace('\n', " "))]),
            };
            let (left, hits) = unexplained(&lines, &allowed);
            used.extend(hits);
            failures.extend(left.into_iter().map(|l| format!("{release}.{case}: {l}")));
        }
    }
    assert!(failures.is_empty(), "differences from upstream not in ALLOWED:\n{}", failures.join("\n"));
    let stale: Vec<&str> = ALLOWED.iter().flat_map(|a| a.lines.iter().copied()).filter(|l| !used.contains(l)).collect();
    assert!(stale.is_empty(), "ALLOWED lines no case needs any more (remove them and their README rows): {stale:?}");
}

#[test]
fn the_static_manifest_replaces_upstreams_in_place() {
    let read = |path: PathBuf| parse_documents(&std::fs::read_to_string(&path).expect("manifest"));
    let upstream = read(fixtures().join("static-manifest-reloader.yaml"));
    let ours = read(repo().join("deploy/kubernetes/reloader.yaml"));
    let ids = |objects: &[Value]| -> BTreeSet<String> {
        objects
            .iter()
            .map(|o| {
                let ns = o["metadata"]["namespace"].as_str().map(|n| format!("{n}/")).unwrap_or_default();
                format!(
                    "object {} {ns}{}",
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let (u, o) = (ids(&upstream), ids(&ours));
    let mut lines: BTreeSet<String> = u.difference(&o).map(|x| format!("{x}: only upstream")).collect();
    lines.extend(o.difference(&u).map(|x| format!("{x}: only ours")));
    let (left, used) = unexplained(&lines, &STATIC_ALLOWED.iter().collect::<Vec<_>>());
    assert!(left.is_empty(), "differences from upstream's static manifest not allowed: {left:?}");
    let allowed_lines: usize = STATIC_ALLOWED.iter().map(|a| a.lines.len()).sum();
    assert_eq!(used.len(), allowed_lines, "stale STATIC_ALLOWED lines: {lines:?}");
    // A Deployment's selector cannot change: applying ours over upstream's must keep it.
    let selector =
        |objects: &[Value]| find(objects, "Deployment", Some("reloader-reloader"))["spec"]["selector"].clone();
    assert_eq!(selector(&ours), selector(&upstream));
    assert_eq!(selector(&ours), json!({"matchLabels": {"app": "reloader-reloader"}}));
}

#[test]
fn every_allowed_difference_is_a_row_of_the_readme_table() {
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("chart README");
    let section = readme.split("## Differences from upstream").nth(1).expect("a 'Differences from upstream' section");
    let section = section.split("\n## ").next().unwrap_or_default();
    // Rows of the table whose first column names a test id: | `id` | … |
    let documented: BTreeSet<&str> =
        section.lines().filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(id, _)| id)).collect();
    let listed: BTreeSet<&str> = ALLOWED.iter().chain(&STATIC_ALLOWED).map(|a| a.id).collect();
    assert_eq!(documented, listed, "README rows (left) and ALLOWED ids (right) must be the same");
    for id in listed {
        let row = section.lines().find(|l| l.starts_with(&format!("| `{id}`"))).unwrap_or_default();
        assert!(row.matches('|').count() >= 4 && row.len() > 40, "README row for {id} has no reason: {row}");
    }
}
