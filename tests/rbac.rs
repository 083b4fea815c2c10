//! The chart's RBAC is sufficient and minimal. The chart is rendered with every feature on (Argo Rollouts,
//! DeploymentConfigs, a configured kind (Kruise CloneSet), pod restarts (evict-pods, delete-pods), CSI, HA;
//! cluster-wide with a namespace selector, and namespaced) and with the optional
//! kinds ignored (Secrets and Jobs: CronJobs must still create Jobs), its ServiceAccount and roles are applied,
//! and the controller runs locally exactly as the chart's Deployment runs it (args and env) with a token of the
//! chart's ServiceAccount (TokenRequest). With every rule it reloads each enabled kind and records an Event;
//! with any single rule removed from the chart's roles, that no longer happens. Scoped mode
//! (`reloader.namespaces`, a Role per listed namespace, the same rules as the namespaced variant) is run once
//! with its full RBAC: it reloads in every listed namespace and nowhere else.

mod common;
#[path = "rbac/workloads.rs"]
mod workloads;

use std::time::Duration;

use common::{chart::*, csi::*, custom::*, *};
use k8s_openapi::api::{
    apps::v1::Deployment,
    authorization::v1::SubjectAccessReview,
    core::v1::{ConfigMap, Namespace},
    rbac::v1::{PolicyRule, Role},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use workloads::{create_workloads, missing_reloads};

/// Every feature that brings RBAC of its own.
const FEATURES: [&str; 2] = [
    "--set",
    "reloader.isArgoRollouts=true,reloader.isOpenshift=true,reloader.enableCSIIntegration=true,reloader.enableHA=true,\
     reloader.workloadKinds={kruise-cloneset},reloader.podRestarts=true",
];
/// How long the controller may take to sync its watches, and then to perform every reload. A dozen controllers
/// run at once here, each becoming leader, reloading and restarting pods (a GET and three or four requests per
/// restart) against an API server that then answers in seconds: 25 s was missed by a few seconds on a loaded
/// 2-core machine. The cases run concurrently, so this adds 20 s to the test, not to each case.
const SYNC_WAIT: Duration = Duration::from_secs(20);
const RELOADS_WAIT: Duration = Duration::from_secs(45);
const ROLE_KINDS: [&str; 2] = ["ClusterRole", "Role"];
/// The release (and namespace) name used to list the chart's rules.
const PROBE: &str = "probe";

/// One rule of one of the chart's roles: (kind, name without the release prefix, index), and what it grants.
#[derive(Clone, Debug)]
struct RuleRef {
    kind: String,
    name: String,
    index: usize,
    grants: Value,
}

/// Ignoring Secrets and Jobs: their rules go, except `jobs: create` for CronJob reloads.
const IGNORING: [&str; 2] = ["--set", "reloader.ignoreSecrets=true,reloader.ignoreJobs=true"];

/// Which chart configuration a case runs.
#[derive(Clone, Copy, Debug)]
struct Variant {
    /// Cluster-wide (selecting only the case's namespace) or namespaced (`watchGlobally: false`).
    cluster: bool,
    /// Every feature on, or Secrets and Jobs ignored and no optional kinds.
    full: bool,
}

/// The rendered chart for a case in `namespace`.
fn render(namespace: &str, variant: Variant) -> Vec<Value> {
    let scope = if variant.cluster {
        format!("reloader.namespaceSelector=reloader-rbac-case={namespace}")
    } else {
        "reloader.watchGlobally=false".to_owned()
    };
    let mut values = if variant.full { FEATURES.to_vec() } else { IGNORING.to_vec() };
    values.extend(["--set", scope.as_str()]);
    template(namespace, namespace, &values)
}

/// Every rule of every role the chart renders.
fn rules(objects: &[Value]) -> Vec<RuleRef> {
    let roles = objects.iter().filter(|o| ROLE_KINDS.iter().any(|k| o["kind"] == *k));
    roles
        .flat_map(|role| {
            let rules = role["rules"].as_array().cloned().unwrap_or_default();
            rules.into_iter().enumerate().map(|(index, grants)| RuleRef {
                kind: role["kind"].as_str().unwrap_or_default().to_owned(),
                name: role["metadata"]["name"].as_str().unwrap_or_default().trim_start_matches(PROBE).to_owned(),
                index,
                grants,
            })
        })
        .collect()
}

/// The chart's RBAC objects (ServiceAccount, roles, bindings), without `removed`.
fn rbac_objects(objects: &[Value], removed: Option<&RuleRef>) -> Vec<Value> {
    let kinds = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];
    let mut rbac: Vec<Value> = objects.iter().filter(|o| kinds.iter().any(|k| o["kind"] == *k)).cloned().collect();
    if let Some(rule) = removed {
        let role = rbac
            .iter_mut()
            .find(|o| {
                o["kind"] == rule.kind.as_str()
                    && o["metadata"]["name"].as_str().is_some_and(|n| n.ends_with(&rule.name))
            })
            .unwrap_or_else(|| panic!("no {} {}", rule.kind, rule.name));
        if let Some(list) = role["rules"].as_array_mut() {
            list.remove(rule.index);
        }
    }
    rbac
}

/// Starts the controller as the chart's Deployment runs it (args, env) with a token of the chart's
/// ServiceAccount, released as `release` in namespace `release`.
async fn spawn_as_chart_runs_it(client: &Client, objects: &[Value], release: &str) -> Reloader {
    let service_account = format!("{release}-reloader");
    let kubeconfig = service_account_kubeconfig(client, release, &service_account).await;
    let (args, mut env) = container_command(objects, release, &format!("{release}-pod"));
    env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    // These cases test RBAC, not leader election: with a dozen controllers and their workloads at once, late in
    // `make test`, the API server once took more than the default 10 s to answer a Lease renewal and the
    // controller stepped down mid-case. A longer lease keeps each case's one controller leading.
    env.extend(
        [("LEADER_ELECTION_LEASE_DURATION", "60s"), ("LEADER_ELECTION_RENEW_DEADLINE", "45s")]
            .map(|(k, v)| (k.into(), v.into())),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Reloader::spawn(&args, &env)
}

/// Runs the controller as the chart configures it, with the chart's RBAC minus `removed`, and reports whether
/// it reloaded every kind (Err says what did not happen).
async fn reloads_everything(client: Client, variant: Variant, removed: Option<RuleRef>) -> Result<(), String> {
    let ns = TestNamespace::create("rbac").await;
    let labels = json!({"metadata": {"labels": {"reloader-rbac-case": ns.name}}});
    Api::<Namespace>::all(client.clone())
        .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("label namespace");
    let objects = render(&ns.name, variant);
    let rbac = rbac_objects(&objects, removed.as_ref());
    apply(&client, &rbac).await;
    let old_job_uid = create_workloads(&ns, variant.full).await;

    let reloader = spawn_as_chart_runs_it(&client, &objects, &ns.name).await;
    let outcome = async {
        if !reloader.has_log_within("watches synced", SYNC_WAIT).await {
            return Err("the controller never synced its watches".to_owned());
        }
        set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
        set_secret_value(&ns, "sec", "k", "2").await;
        if variant.full {
            write_pod_statuses(&ns, "csi", "vault", "2").await;
        }
        let start = std::time::Instant::now();
        loop {
            let missing = missing_reloads(&ns, variant.full, &old_job_uid, &reloader).await;
            if missing.is_empty() {
                return Ok(());
            }
            if start.elapsed() > RELOADS_WAIT {
                return Err(format!("missing: {}", missing.join(", ")));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    .await;
    if outcome.is_err() && removed.is_none() {
        eprintln!("----- reloader log -----\n{}", reloader.logs().join("\n"));
    }
    drop(reloader);
    for cluster_scoped in rbac.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("Cluster"))) {
        let name = cluster_scoped["metadata"]["name"].as_str().unwrap_or_default();
        let _ = api_for(&client, cluster_scoped).await.delete(name, &DeleteParams::default()).await;
    }
    outcome
}

/// The full chart works; each single rule's removal breaks something.
async fn sufficient_and_minimal(variant: Variant) {
    let client = testenv::harness::client().await;
    for crd in [ROLLOUT_CRD, DC_CRD, SPC_CRD, SPCPS_CRD] {
        install_crd(&client, crd).await;
    }
    install_yaml_crd(&client, CLONESET_CRD).await;
    let all_rules = rules(&render(PROBE, variant));
    let mut cases = tokio::task::JoinSet::new();
    for removed in std::iter::once(None).chain(all_rules.iter().cloned().map(Some)) {
        let client = client.clone();
        cases.spawn(async move { (removed.clone(), reloads_everything(client, variant, removed).await) });
    }
    let mut unneeded = Vec::new();
    let mut tested = 0;
    while let Some(joined) = cases.join_next().await {
        let (removed, outcome) = joined.expect("case task");
        match (removed, outcome) {
            (None, Err(e)) => panic!("with the chart's full RBAC the controller did not reload everything: {e}"),
            (None, Ok(())) => {}
            (Some(rule), Ok(())) => {
                unneeded.push(format!("{} {} rule {}: {}", rule.kind, rule.name, rule.index, rule.grants))
            }
            (Some(rule), Err(e)) => {
                tested += 1;
                eprintln!("without {} {} rule {} ({}): {e}", rule.kind, rule.name, rule.index, rule.grants);
            }
        }
    }
    assert!(unneeded.is_empty(), "rules the controller did not need:\n{}", unneeded.join("\n"));
    assert_eq!(tested, all_rules.len());
    assert!(tested >= if variant.full { 10 } else { 6 }, "the chart rendered only {tested} rules");
}

#[tokio::test]
async fn cluster_wide_rbac_is_sufficient_and_each_rule_is_needed() {
    sufficient_and_minimal(Variant { cluster: true, full: true }).await;
}

#[tokio::test]
async fn namespaced_rbac_is_sufficient_and_each_rule_is_needed() {
    sufficient_and_minimal(Variant { cluster: false, full: true }).await;
}

#[tokio::test]
async fn with_secrets_and_jobs_ignored_the_reduced_rbac_still_reloads_cronjobs() {
    sufficient_and_minimal(Variant { cluster: true, full: false }).await;
}

/// Scoped mode (`reloader.namespaces`): no ClusterRole, a Role per listed namespace; with only those the
/// controller syncs, reloads in every listed namespace and leaves an unlisted one alone.
#[tokio::test]
async fn scoped_rbac_reloads_in_each_listed_namespace_and_nowhere_else() {
    let client = testenv::harness::client().await;
    let release = TestNamespace::create("rbac-scoped").await;
    let (team_a, team_b) = (TestNamespace::create("rbac-team-a").await, TestNamespace::create("rbac-team-b").await);
    let outside = TestNamespace::create("rbac-outside").await;
    let listed = format!("reloader.watchGlobally=false,reloader.namespaces={{{},{}}}", team_a.name, team_b.name);
    let objects = template(&release.name, &release.name, &["--set", &listed]);
    assert!(!objects.iter().any(|o| o["kind"] == "ClusterRole"), "scoped mode must not render a ClusterRole");
    let rbac = rbac_objects(&objects, None);
    let role_namespaces: Vec<&str> =
        rbac.iter().filter(|o| o["kind"] == "Role").filter_map(|o| o["metadata"]["namespace"].as_str()).collect();
    for ns in [&team_a.name, &team_b.name, &release.name] {
        assert!(role_namespaces.contains(&ns.as_str()), "no Role in {ns}: {role_namespaces:?}");
    }
    apply(&client, &rbac).await;
    let uses = json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    for ns in [&team_a, &team_b, &outside] {
        create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
        let auto = json!({"reloader.stakater.com/auto": "true"});
        Kind::Deployment.create(ns, "app", auto, json!({}), uses.clone()).await;
    }
    let reloader = spawn_as_chart_runs_it(&client, &objects, &release.name).await;
    assert!(reloader.has_log_within("watches synced", SYNC_WAIT).await, "{}", reloader.logs().join("\n"));
    for ns in [&team_a, &team_b, &outside] {
        set_configmap_data(ns, "cfg", &[("k", "2")]).await;
    }
    let hash = configmap_hash(&[("k", "2")]);
    for ns in [&team_a, &team_b] {
        wait_for("the reload in a listed namespace", RELOADS_WAIT, || async {
            let value = Kind::Deployment.env(ns, "app", "app", "STAKATER_CFG_CONFIGMAP").await;
            if value.as_deref() == Some(hash.as_str()) { Ok(()) } else { Err(format!("{value:?}")) }
        })
        .await;
    }
    let meta_info = api::<ConfigMap>(&release).get_opt("reloader-meta-info").await.expect("get meta-info");
    assert!(meta_info.is_some(), "the meta-info ConfigMap in the release namespace");
    // The listed namespaces' reloads are done; the unlisted one had the same time and more to see nothing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(Kind::Deployment.env(&outside, "app", "app", "STAKATER_CFG_CONFIGMAP").await, None);
    assert!(!reloader.logs().iter().any(|l| l.contains("forbidden")), "{}", reloader.logs().join("\n"));
}

/// Key-level reloads read a resource when a workload wants a view of it the watch has not brought yet (here: a
/// workload created after the resource was last seen). The chart grants `list` and `watch` on ConfigMaps, not
/// `get`: that read must need nothing more — it was a GET, refused, retried forever, and it held back the
/// workload's other reloads too.
#[tokio::test]
async fn key_level_reads_need_no_rule_beyond_the_charts() {
    let reloader = key_level_reader_with_another_configmap("rbac-keys", false).await;
    assert!(!reloader.logs().iter().any(|l| l.contains("forbidden")), "{}", reloader.logs().join("\n"));
}

/// A key-level view that cannot be read holds back only the reload it is for. Here the controller loses `list`
/// on ConfigMaps once its watches have synced (they keep running), so reading `cfg` for the workload's view of
/// key `a` is refused; the workload's other ConfigMap must still be recorded and reloaded. The whole reconcile
/// used to fail on the read and retry, writing nothing for the workload until the read succeeded.
#[tokio::test]
async fn an_unreadable_view_holds_back_only_its_own_reload() {
    let reloader = key_level_reader_with_another_configmap("rbac-unread", true).await;
    // The read was refused (so the case tested what it says) and is reported, naming the resource.
    let refused = |l: &&String| l.contains("reading ConfigMap") && l.contains("/cfg") && l.contains("forbidden");
    assert!(reloader.logs().iter().any(|l| refused(&l)), "{}", reloader.logs().join("\n"));
}

/// Runs the controller with the chart's namespaced RBAC (without `list` on ConfigMaps once synced, when
/// `unlisted`), creates Deployment `web` reading key `a` of `cfg` (key-level) and all of `other`, and waits for
/// its first-sight record to name `other` and for a change of `other` to reload it.
async fn key_level_reader_with_another_configmap(prefix: &str, unlisted: bool) -> Reloader {
    let client = testenv::harness::client().await;
    let ns = TestNamespace::create(prefix).await;
    let objects = render(&ns.name, Variant { cluster: false, full: false });
    apply(&client, &rbac_objects(&objects, None)).await;
    create_configmap(&ns, "cfg", &[("a", "1"), ("b", "1")], &[]).await;
    create_configmap(&ns, "other", &[("x", "1")], &[]).await;
    let reloader = spawn_as_chart_runs_it(&client, &objects, &ns.name).await;
    assert!(reloader.has_log_within("watches synced", SYNC_WAIT).await, "{}", reloader.logs().join("\n"));
    if unlisted {
        let roles = Api::<Role>::namespaced(client.clone(), &ns.name);
        for mut role in roles.list(&ListParams::default()).await.expect("list roles").items {
            let rules = role.rules.take().unwrap_or_default().into_iter().filter_map(|mut rule| {
                let resources = rule.resources.take()?.into_iter().filter(|r| r != "configmaps").collect::<Vec<_>>();
                (!resources.is_empty()).then_some(PolicyRule { resources: Some(resources), ..rule })
            });
            role.rules = Some(rules.collect());
            role.metadata.managed_fields = None;
            roles.replace(&role.name_any(), &PostParams::default(), &role).await.expect("take configmaps away");
        }
        // The authorizer sees Role changes through its own watch: wait until it denies the read.
        let user = format!("system:serviceaccount:{0}:{0}-reloader", ns.name);
        let review: SubjectAccessReview = serde_json::from_value(json!({"spec": {"user": user,
            "resourceAttributes": {"namespace": ns.name, "verb": "list", "resource": "configmaps"}}}))
        .expect("review");
        let reviews = Api::<SubjectAccessReview>::all(client.clone());
        wait_for("list on ConfigMaps denied", SYNC_WAIT, || async {
            let answer = reviews.create(&PostParams::default(), &review).await.map_err(|e| e.to_string())?;
            match answer.status.map(|s| s.allowed) {
                Some(false) => Ok(()),
                other => Err(format!("allowed: {other:?}")),
            }
        })
        .await;
    }
    let annotations = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/reload-on": "keys-used"});
    let spec = json!({"containers": [{"name": "app", "image": "x",
        "env": [{"name": "READ", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}],
        "envFrom": [{"configMapRef": {"name": "other"}}]}]});
    Kind::Deployment.create(&ns, "web", annotations, json!({}), spec).await;
    // The first reconcile records what the workload runs with.
    let recorded = if unlisted { "other" } else { "cfg" };
    wait_for("the first-sight record", RELOADS_WAIT, || async {
        let web = api::<Deployment>(&ns).get("web").await.map_err(|e| e.to_string())?;
        match web.annotations().get("reloader.stakater.com/applied-hashes") {
            Some(r) if r.contains(recorded) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    set_configmap_data(&ns, "other", &[("x", "2")]).await;
    let hash = configmap_hash(&[("x", "2")]);
    wait_for("the reload for the other ConfigMap", RELOADS_WAIT, || async {
        let value = Kind::Deployment.env(&ns, "web", "app", "STAKATER_OTHER_CONFIGMAP").await;
        if value.as_deref() == Some(hash.as_str()) { Ok(()) } else { Err(format!("{value:?}")) }
    })
    .await;
    reloader
}
