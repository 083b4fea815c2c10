//! Packaging, with the real helm and kubectl against the test control plane: the chart lints, renders the
//! golden files (default values, an upstream user's values file, namespaced, scoped and HA), refuses the values
//! upstream's chart turned into broken installs, installs; the static manifests are current and, applied with
//! `kubectl apply -k`, give the controller what it needs to reload, and work as a kustomize base.

mod common;

use common::{chart::*, *};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use serde_json::json;

/// The golden cases: (file under tests/chart/golden, values file under tests/chart). Same list as deploy/render.sh.
const GOLDEN: [(&str, Option<&str>); 5] = [
    ("default", None),
    ("upstream-values", Some("upstream-values")),
    ("namespaced", Some("namespaced")),
    ("scoped", Some("scoped")),
    ("ha", Some("ha")),
];

fn values_file(name: &str) -> String {
    repo().join(format!("tests/chart/{name}.yaml")).display().to_string()
}

#[test]
fn the_chart_lints_with_every_values_file() {
    let chart = chart_dir().display().to_string();
    helm(&["lint", "--strict", &chart]);
    for (_, values) in GOLDEN {
        if let Some(v) = values {
            helm(&["lint", "--strict", &chart, "--values", &values_file(v)]);
        }
    }
}

#[test]
fn golden_renders_and_static_manifests_are_current() {
    let stale = "is stale: run `make manifests` and review the diff";
    for (golden, values) in GOLDEN {
        let file = values.map(values_file);
        let extra: Vec<&str> = file.iter().flat_map(|f| ["--values", f.as_str()]).collect();
        let rendered = template_text("reloader", "reloader", &extra).unwrap_or_else(|e| panic!("{e}"));
        let path = repo().join(format!("tests/chart/golden/{golden}.yaml"));
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(rendered == expected, "{} {stale}", path.display());
        assert!(!parse_documents(&rendered).is_empty(), "{golden}: no objects");
    }
    let manifest = std::fs::read_to_string(repo().join("deploy/kubernetes/reloader.yaml")).unwrap_or_default();
    // Upstream's static manifest's names and namespace (deploy/render.sh).
    let static_values = repo().join("deploy/kubernetes/chart-values.yaml").display().to_string();
    let default = template_text("reloader", "default", &["--values", &static_values]).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        manifest.ends_with(&default) && manifest.starts_with("# Generated"),
        "deploy/kubernetes/reloader.yaml {stale}"
    );
}

#[test]
fn upstream_values_render_upstream_flags() {
    let values = values_file("upstream-values");
    // The cluster serves the monitoring and autoscaling APIs (upstream renders the ServiceMonitor and the VPA only
    // then).
    let apis = ["--api-versions", "monitoring.coreos.com/v1", "--api-versions", "autoscaling.k8s.io/v1"];
    let mut extra = vec!["--values", &values, "--set", "reloader.deployment.env.secret.DB_URL=x"];
    extra.extend(apis);
    let objects = template("reloader", "reloader", &extra);
    let (args, env) = container_command(&objects, "reloader", "pod");
    for flag in [
        "--log-format=json",
        "--namespaces-to-ignore=kube-system,kube-public",
        "--namespace-selector=team=payments,env!=dev",
        "--resource-label-selector=reloader=enabled",
        "--is-Argo-Rollouts=true",
        "--reload-on-create=true",
        "--reload-on-delete=true",
        "--sync-after-restart=true",
        "--reload-strategy=annotations",
        "--auto-reload-all=true",
        "--enable-csi-integration=true",
        "--ignored-workload-types=jobs",
    ] {
        assert!(args.iter().any(|a| a == flag), "missing {flag} in {args:?}");
    }
    let pair = |flag: &str, value: &str| args.windows(2).any(|w| w[0] == flag && w[1] == value);
    assert!(pair("--configmap-annotation", "my.company.com/configmap"), "{args:?}");
    assert!(pair("--search-match-annotation", "my.company.com/match"), "{args:?}");
    assert!(env.contains(&("METRICS_COUNT_BY_NAMESPACE".into(), "enabled".into())), "{env:?}");
    // Every env.secret key is stored (upstream wrote only the four ALERT_* keys).
    let secret = find(&objects, "Secret", Some("reloader-reloader"));
    let keys: Vec<&String> = secret["data"].as_object().map(|m| m.keys().collect()).unwrap_or_default();
    assert_eq!(keys, ["ALERT_ADDITIONAL_INFO", "ALERT_ON_RELOAD", "ALERT_SINK", "ALERT_WEBHOOK_URL", "DB_URL"]);
    // A read-only root filesystem with /tmp as an emptyDir, as upstream's readOnlyRootFileSystem.
    let pod = &find(&objects, "Deployment", None)["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"], json!(true));
    assert_eq!(pod["volumes"][0], json!({"name": "tmp-volume", "emptyDir": {}}));
    // The ServiceAccount name, monitors, budget, policy and autoscaler upstream's values ask for.
    assert_eq!(pod["serviceAccountName"], "reloader-sa");
    for kind in
        ["Service", "ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "NetworkPolicy", "VerticalPodAutoscaler"]
    {
        find(&objects, kind, None);
    }
}

#[test]
fn added_values_render_their_flags_and_defaults_render_none() {
    let values = [
        "reloader.reloadOn=keys-used",
        "reloader.rolloutStrategy=restart",
        "reloader.namespaceRules=true",
        "reloader.allowCrossNamespaceReferences=true",
        "reloader.workloadKinds={knative-service,example.com/v1/Widget=spec.podTemplate,example.com/v1/Policy,example.com/v1/Box,example.com/v1/Gateway}",
        "reloader.rollouts.maxConcurrent=10",
        "reloader.rollouts.timeout=15m",
        "reloader.rollouts.haltOnFailure=true",
        "reloader.rollouts.namespaceWindows=true",
    ];
    let extra = ["--set", &values.join(",")];
    let objects = template("reloader", "reloader", &extra);
    let (args, _) = container_command(&objects, "reloader", "pod");
    let flags = [
        "--reload-on=keys-used",
        "--rollout-strategy=restart",
        "--namespace-rules=true",
        "--allow-cross-namespace-references=true",
        "--workload-kind=knative-service",
        "--workload-kind=example.com/v1/Widget=spec.podTemplate",
        "--max-concurrent-rollouts=10",
        "--rollout-timeout=15m",
        "--halt-on-failed-rollout=true",
        "--namespace-reload-windows=true",
    ];
    for flag in flags {
        assert!(args.iter().any(|a| a == flag), "missing {flag} in {args:?}");
    }
    let rules = find(&objects, "ClusterRole", None)["rules"].clone();
    let namespaces = json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]});
    assert!(rules.as_array().is_some_and(|r| r.contains(&namespaces)), "namespace windows read namespaces: {rules}");
    // Plurals as the controller derives them (configured_kinds.rs), not a bare "s".
    let resources = [
        ("serving.knative.dev", "services"),
        ("example.com", "widgets"),
        ("example.com", "policies"),
        ("example.com", "boxes"),
        ("example.com", "gateways"),
    ];
    for (group, resource) in resources {
        let rule = json!({"apiGroups": [group], "resources": [resource], "verbs": ["get", "list", "watch", "patch"]});
        assert!(rules.as_array().is_some_and(|r| r.contains(&rule)), "{group} {resource}: {rules}");
    }
    for alone in ["reloader.namespaceRules=true", "reloader.rollouts.namespaceWindows=true"] {
        let rules = find(&template("reloader", "reloader", &["--set", alone]), "ClusterRole", None)["rules"].clone();
        assert!(rules.as_array().is_some_and(|r| r.contains(&namespaces)), "{alone} reads namespaces: {rules}");
    }
    let rules = find(&template("reloader", "reloader", &[]), "ClusterRole", None)["rules"].clone();
    assert!(!rules.as_array().is_some_and(|r| r.contains(&namespaces)), "no namespace rule by default: {rules}");
    let (defaults, _) = container_command(&template("reloader", "reloader", &[]), "reloader", "pod");
    assert!(
        !defaults.iter().any(|a| flags.iter().any(|f| a.starts_with(f.split('=').next().unwrap_or(f)))),
        "{defaults:?}"
    );
}

#[test]
fn broken_installs_fail_at_render_time_with_the_reason() {
    let refused_image = "is upstream Stakater Reloader's controller, which this chart cannot run";
    let cases: [(&[&str], &str); 13] = [
        (&["--set", "image.repository=ghcr.io/stakater/reloader"], refused_image),
        (&["--set", "reloader.deployment.image.name=stakater/reloader"], refused_image),
        (&["--set", "global.imageRegistry=registry.internal,image.name=stakater/reloader"], refused_image),
        (&["--set", "reloader.deployment.image.name=docker.io/stakater/reloader"], refused_image),
        (
            &["--set", "reloader.ignoreSecrets=true", "--set", "reloader.ignoreConfigMaps=true"],
            "reloader.ignoreSecrets and reloader.ignoreConfigMaps are both true",
        ),
        (
            &["--set", "reloader.deployment.replicas=2"],
            "reloader.deployment.replicas is 2 but reloader.enableHA is false",
        ),
        (
            &["--set", "reloader.namespaces={a,b}"],
            "reloader.namespaces is set but reloader.watchGlobally is true; set reloader.watchGlobally=false",
        ),
        (
            &["--set", "reloader.watchGlobally=false", "--set", "reloader.namespaceSelector=team=a"],
            "only apply when reloader.watchGlobally=true",
        ),
        (
            &["--set", "reloader.watchGlobally=false", "--set", "reloader.rollouts.namespaceWindows=true"],
            "reloader.rollouts.namespaceWindows needs reloader.watchGlobally=true",
        ),
        (
            &["--set", "reloader.watchGlobally=false", "--set", "reloader.namespaceRules=true"],
            "reloader.namespaceRules needs reloader.watchGlobally=true",
        ),
        (&["--set", "reloader.workloadKinds={CloneSet}"], "'CloneSet' does not match pattern"),
        (&["--set", "reloader.reloadStrategy=rolling"], "value must be one of 'default', 'env-vars', 'annotations'"),
        (&["--set", "reloader.custom_annotations.confgmap=x"], "additional properties 'confgmap' not allowed"),
    ];
    for (values, message) in cases {
        match template_text("reloader", "reloader", values) {
            Ok(_) => panic!("{values:?} rendered; expected a failure mentioning {message:?}"),
            Err(e) => assert!(e.contains(message), "{values:?}: expected {message:?} in {e}"),
        }
    }
    // Upstream's own values.yaml, verbatim: refused, naming the image and the way out.
    let upstream = repo().join("tests/chart/upstream/values.yaml").display().to_string();
    let e = template_text("reloader", "reloader", &["--values", &upstream]).expect_err("upstream's image refused");
    assert!(e.contains("the image ghcr.io/stakater/reloader is upstream") && e.contains("Remove image.name"), "{e}");
}

/// The schema's duration values accept what the controller's flags accept (a Go duration, `0`, or empty for the
/// default), and refuse what they refuse, so a value that renders also starts.
#[test]
fn duration_values_render_exactly_when_the_flag_accepts_them() {
    for value in ["0", "0s", "1.5s", ".5s", "1h30m", "200ms", "+2s", "10x", "-1s", "5", "s"] {
        let flag_accepts = reloader::rules::duration::parse_go_duration(value).is_ok();
        for key in ["reloader.coalesceWindow", "reloader.rollouts.timeout"] {
            let set = format!("{key}={value}");
            let renders = template_text("reloader", "reloader", &["--set-string", &set]).is_ok();
            assert_eq!(renders, flag_accepts, "{set}: the chart and the flag disagree");
        }
    }
}

#[test]
fn the_disruption_budget_never_blocks_a_drain_by_default() {
    let budget = |extra: &[&str]| {
        let mut args = vec!["--set", "reloader.podDisruptionBudget.enabled=true"];
        args.extend(extra);
        find(&template("reloader", "reloader", &args), "PodDisruptionBudget", None)["spec"].clone()
    };
    // One replica and minAvailable 1 would refuse every eviction: the default allows one pod down.
    assert_eq!(budget(&[])["maxUnavailable"], json!(1));
    assert_eq!(budget(&[])["minAvailable"], json!(null));
    // Upstream's keys still decide when set (maxUnavailable wins when both are).
    assert_eq!(budget(&["--set", "reloader.podDisruptionBudget.minAvailable=1"])["minAvailable"], json!(1));
    let both =
        budget(&["--set", "reloader.podDisruptionBudget.minAvailable=1,reloader.podDisruptionBudget.maxUnavailable=0"]);
    assert_eq!((both["maxUnavailable"].clone(), both["minAvailable"].clone()), (json!(0), json!(null)));
}

#[test]
fn rbac_follows_the_enabled_features() {
    let rules = |extra: &[&str]| {
        let objects = template("r", "ns", extra);
        find(&objects, "ClusterRole", None)["rules"].as_array().cloned().unwrap_or_default()
    };
    let resources = |rules: &[serde_json::Value]| -> Vec<String> {
        rules
            .iter()
            .flat_map(|r| r["resources"].as_array().cloned().unwrap_or_default())
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let default = rules(&[]);
    assert_eq!(
        resources(&default),
        ["configmaps", "secrets", "deployments", "daemonsets", "statefulsets", "cronjobs", "jobs", "events"]
    );
    assert!(
        !default.iter().any(|r| r["verbs"].as_array().is_some_and(|v| v.contains(&json!("update")))),
        "{default:?}"
    );
    // Ignoring Jobs keeps `jobs create`, which CronJob reloads need (upstream v1 dropped it).
    let no_jobs = rules(&["--set", "reloader.ignoreJobs=true"]);
    assert!(
        no_jobs.contains(&json!({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]})),
        "{no_jobs:?}"
    );
    let neither =
        rules(&["--set", "reloader.ignoreJobs=true,reloader.ignoreCronJobs=true,reloader.ignoreSecrets=true"]);
    assert_eq!(resources(&neither), ["configmaps", "deployments", "daemonsets", "statefulsets", "events"]);
    let features = "reloader.isArgoRollouts=true,reloader.isOpenshift=true,reloader.enableCSIIntegration=true";
    let all = rules(&["--set", features, "--set", "reloader.namespaceSelector=a=b"]);
    for r in ["namespaces", "rollouts", "deploymentconfigs", "secretproviderclasspodstatuses", "secretproviderclasses"]
    {
        assert!(resources(&all).iter().any(|x| x == r), "{r} missing: {all:?}");
    }
    // Leases only with HA, and only in the release namespace.
    let ha = template("r", "ns", &["--set", "reloader.enableHA=true"]);
    let lease_role = find(&ha, "Role", Some("r-reloader-leader-election"));
    assert_eq!(lease_role["metadata"]["namespace"], "ns");
    assert!(!template("r", "ns", &[]).iter().any(|o| o["metadata"]["name"] == "r-reloader-leader-election"));
}

#[tokio::test]
async fn helm_install_into_the_cluster_succeeds_with_default_and_ha_values() {
    let ns = TestNamespace::create("helm").await;
    let chart = chart_dir().display().to_string();
    let ha_values = values_file("ha");
    for (release, replicas, extra) in
        [(ns.name.clone(), 1, vec![]), (format!("{}-ha", ns.name), 3, vec!["--values", &ha_values])]
    {
        let mut args = vec!["install", &release, &chart, "--namespace", &ns.name, "--wait", "--timeout", "120s"];
        args.extend(extra);
        helm(&args);
        let deployment = ns.api::<Deployment>().get(&format!("{release}-reloader")).await.expect("deployment");
        let available = deployment.status.and_then(|s| s.available_replicas).unwrap_or_default();
        assert_eq!(available, replicas, "{release}: the chart's Deployment is available");
        let status = helm(&["status", &release, "--namespace", &ns.name]);
        assert!(status.contains("STATUS: deployed"), "{status}");
        helm(&["uninstall", &release, "--namespace", &ns.name, "--wait"]);
    }
}

#[tokio::test]
async fn kustomize_manifests_apply_and_their_rbac_reloads() {
    let client = testenv::harness::client().await;
    let dir = repo().join("deploy/kubernetes").display().to_string();
    run(&tool("kubectl"), &["apply", "-k", &dir]).unwrap_or_else(|e| panic!("{e}"));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    wait_for("the manifests' Deployment to be available", RELOAD_WAIT, || async {
        let d = deployments.get("reloader-reloader").await.map_err(|e| e.to_string())?;
        let available = d.status.and_then(|s| s.available_replicas).unwrap_or_default();
        if available == 1 { Ok(()) } else { Err(format!("{available} available")) }
    })
    .await;

    // The controller exactly as the manifests run it, with the manifests' ServiceAccount, kept to this test's
    // namespace so it leaves other tests' workloads alone.
    let ns = TestNamespace::create("kustomize").await;
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes/reloader.yaml")).expect("manifest");
    let scoped = [format!("--namespaces={}", ns.name)];
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_reloader"));
    installed_controller_reloads(binary, &parse_documents(&text), "default", "reloader-reloader", &scoped, &ns).await;
    let _ = run(&tool("kubectl"), &["delete", "-k", &dir, "--wait=false"]);
}

#[test]
fn the_kustomization_works_as_a_base_with_another_namespace() {
    // kustomize only accepts bases by relative path: the overlay lives under target/.
    let overlay = repo().join("target/kustomize-overlay-test");
    std::fs::create_dir_all(&overlay).expect("overlay dir");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources:\n  - ../../deploy/kubernetes\nnamespace: platform\n",
    )
    .expect("overlay");
    let built =
        run(&tool("kubectl"), &["kustomize", overlay.to_str().unwrap_or_default()]).unwrap_or_else(|e| panic!("{e}"));
    let objects = parse_documents(&built);
    assert_eq!(find(&objects, "Namespace", None)["metadata"]["name"], "platform");
    assert_eq!(find(&objects, "Deployment", Some("reloader-reloader"))["metadata"]["namespace"], "platform");
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(find(&objects, binding, None)["subjects"][0]["namespace"], "platform", "{binding}");
    }
}

#[tokio::test]
async fn the_charts_hash_key_values_give_a_key_and_the_rbac_to_read_it() {
    let client = testenv::harness::client().await;
    let ns = TestNamespace::create("chart-hashkey").await;
    let objects = template(&ns.name, &ns.name, &["--set", "reloader.hashKey.enabled=true"]);
    let key = find(&objects, "Secret", Some(&format!("{}-reloader-hash-key", ns.name)));
    assert_eq!(key["metadata"]["annotations"]["helm.sh/resource-policy"], "keep", "kept across uninstalls");
    apply(&client, &objects).await;

    // The controller as the chart runs it, with the chart's ServiceAccount, kept to this namespace.
    let (mut args, mut env) = container_command(&objects, &ns.name, "reloader-0");
    assert!(args.contains(&format!("--hash-key-secret={0}/{0}-reloader-hash-key", ns.name)), "{args:?}");
    args.push(format!("--namespaces={}", ns.name));
    let kubeconfig = service_account_kubeconfig(&client, &ns.name, &format!("{}-reloader", ns.name)).await;
    env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    create_secret(&ns, "db", &[("password", "123456")], &[]).await;
    let meta = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "app", meta, json!({}), volume_secret("db")).await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let reloader = Reloader::spawn(&args, &env);
    reloader.wait_log("all watches synced").await;
    set_secret_value(&ns, "db", "password", "654321").await;
    Kind::Deployment.wait_revisions(&ns, "app", 2).await;
    let value = Kind::Deployment.env(&ns, "app", "app", "STAKATER_DB_SECRET").await.expect("STAKATER_DB_SECRET");
    assert_eq!(value.len(), 40, "upstream's shape");
    assert_ne!(value, secret_hash(&[("password", "654321")]), "keyed, not the plain SHA-1");
}

/// The GitHub workflows (not run from this machine) pass actionlint; CI runs exactly `.ci/run`, and the release
/// builds its files with build/release-artifacts.sh (what `make release` runs), with the helm this project tests
/// with, and signs with the cosign `make sign-check` runs.
#[test]
fn the_workflows_pass_actionlint() {
    let workflows = repo().join(".github/workflows");
    let files: Vec<String> =
        ["ci.yml", "release.yml"].iter().map(|f| workflows.join(f).display().to_string()).collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    run(&tool("actionlint"), &args).unwrap_or_else(|e| panic!("actionlint: {e}"));

    let ci = std::fs::read_to_string(&files[0]).expect("ci.yml");
    assert!(ci.contains("run: .ci/run"), "CI runs the test command of .ci/run");
    let release = std::fs::read_to_string(&files[1]).expect("release.yml");
    assert!(release.contains("build/release-artifacts.sh"), "release.yml builds with build/release-artifacts.sh");
    assert!(release.contains(". testenv/versions.env") && release.contains("helm@$HELM_VERSION"), "release.yml's helm");
    let pinned = std::fs::read_to_string(repo().join("build/versions.env")).expect("build/versions.env");
    let cosign = pinned.lines().find_map(|l| l.strip_prefix("COSIGN_VERSION=")).expect("COSIGN_VERSION");
    assert!(release.contains(&format!("(cosign {cosign})")), "release.yml's cosign-installer installs cosign {cosign}");
}

/// Every action a workflow uses is pinned by the commit of a release (a tag can be moved; a commit cannot), its
/// tag in a trailing comment. Only the release's `sign` job may ask for an OIDC token (`id-token: write`, the
/// identity its signatures carry): it checks nothing out and runs no build or install, so no code of a build step
/// or a downloaded tool runs with that token. No workflow grants a permission to all its jobs.
#[test]
fn the_workflows_pin_actions_and_grant_the_oidc_token_only_to_signing() {
    let pin = regex::Regex::new(r"^\s*-?\s*uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+").expect("regex");
    for file in ["ci.yml", "release.yml"] {
        let text = std::fs::read_to_string(repo().join(".github/workflows").join(file)).expect("workflow");
        for line in text.lines().filter(|l| l.contains("uses:")) {
            assert!(pin.is_match(line), "{file}: not pinned by commit with its tag in a comment: {line}");
        }
        let workflow: serde_json::Value = serde_saphyr::from_str(&text).expect("workflow YAML");
        assert_eq!(workflow["permissions"], json!({}), "{file}: jobs say which permissions they need");
        for (name, job) in workflow["jobs"].as_object().expect("jobs") {
            let permissions = job["permissions"].as_object().unwrap_or_else(|| panic!("{file}: {name}: permissions"));
            if permissions.get("id-token").is_none_or(|p| p != "write") {
                continue;
            }
            assert_eq!((file, name.as_str()), ("release.yml", "sign"), "id-token: write outside the signing job");
            for step in job["steps"].as_array().expect("steps") {
                let uses = step["uses"].as_str().unwrap_or_default();
                let allowed = [
                    "actions/download-artifact@",
                    "sigstore/cosign-installer@",
                    "actions/upload-artifact@",
                    "actions/attest-build-provenance@",
                ];
                assert!(uses.is_empty() || allowed.iter().any(|a| uses.starts_with(a)), "the signing job uses {uses}");
                let script = step["run"].as_str().unwrap_or_default();
                for builds in ["apt-get", "go install", "make ", "cargo", "curl", "wget", "pip", "npm", "git "] {
                    assert!(!script.contains(builds), "the signing job runs {builds}: {script}");
                }
            }
        }
    }
}
