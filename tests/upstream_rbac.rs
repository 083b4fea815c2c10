//! Drop-in on upstream's RBAC: the controller runs with a token bound to exactly upstream v1.4.21's ClusterRole
//! rules (chart default render, `../shared/reference/upstream-chart/rendered/reloader.default.yaml`): no
//! `watch` on workloads, no `patch` on CronJobs and Jobs, core `events` only. Every core reload still works —
//! auto, named and search on the apps kinds, a CronJob spawn, a Job recreate, a Deployment created after the
//! controller started (found by listing on the change, upstream's method) — in both strategies, each missing
//! capability is named once in the log, and the `Reloaded` Event is recorded.

mod common;

use common::{
    rbac::{Scope, delete_cluster_role, service_account_with_rules},
    *,
};
use k8s_openapi::api::{
    batch::v1::{CronJob, Job},
    events::v1::Event,
};
use kube::{ResourceExt, api::PostParams};
use serde_json::{Value, json};

/// upstream v1.4.21's ClusterRole rules, verbatim from its chart's default render.
fn upstream_v1_rules() -> Value {
    json!([
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["list", "get", "watch"]},
        {"apiGroups": ["apps"], "resources": ["deployments", "daemonsets", "statefulsets"], "verbs": ["list", "get", "update", "patch"]},
        {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["list", "get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "list", "get"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
    ])
}

fn batch_pod(uses: &str) -> Value {
    json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "x", "envFrom": [{"configMapRef": {"name": uses}}]}]})
}

async fn every_core_reload_works_with_upstreams_rbac(strategy: &str) {
    let ns = TestNamespace::create(&format!("upstream-rbac-{strategy}")).await;
    let kubeconfig = service_account_with_rules(&ns, "reloader-reloader", upstream_v1_rules(), Scope::Cluster).await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    create_configmap(&ns, "cfg", &[("k", "1")], &[("reloader.stakater.com/match", "true")]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "auto", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    let named = json!({"configmap.reloader.stakater.com/reload": "cfg"});
    Kind::StatefulSet.create(&ns, "named", named, json!({}), plain_pod()).await;
    let search = json!({"reloader.stakater.com/search": "true"});
    Kind::DaemonSet.create(&ns, "search", search, json!({}), env_from_configmap("cfg")).await;
    let cronjob: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "cron", "annotations": auto},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": batch_pod("cfg")}}}}
    }))
    .expect("cronjob");
    ns.api::<CronJob>().create(&PostParams::default(), &cronjob).await.expect("create cronjob");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "job", "annotations": auto},
        "spec": {"backoffLimit": 0, "template": {"spec": batch_pod("cfg")}}
    }))
    .expect("job");
    let old_job = ns.api::<Job>().create(&PostParams::default(), &job).await.expect("create job").uid();

    let strategy_flag = format!("--reload-strategy={strategy}");
    let reloader = Reloader::start_with_env(&ns.name, &[&strategy_flag], &[("KUBECONFIG", kubeconfig.as_str())]).await;
    let fallback = reloader.wait_log("listing deployments.apps in a changed resource's namespace").await;
    assert!(fallback.contains("forbidden"), "{fallback}");
    // Created after the controller started: no watch sees it; the change's LIST does.
    Kind::Deployment.create(&ns, "late", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.wait_revisions(&ns, "late", 1).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "auto", 2).await;
    Kind::StatefulSet.wait_revisions(&ns, "named", 2).await;
    Kind::DaemonSet.wait_revisions(&ns, "search", 2).await;
    Kind::Deployment.wait_revisions(&ns, "late", 2).await;
    wait_for("a Job spawned from the CronJob", RELOAD_WAIT, || async {
        let jobs = ns.api::<Job>().list(&Default::default()).await.map_err(|e| e.to_string())?;
        let spawned = jobs.items.iter().filter(|j| j.owner_references().iter().any(|o| o.name == "cron")).count();
        if spawned == 1 { Ok(()) } else { Err(format!("{spawned} spawned")) }
    })
    .await;
    wait_for("the Job recreated", RELOAD_WAIT, || async {
        let j = ns.api::<Job>().get("job").await.map_err(|e| e.to_string())?;
        if j.uid() != old_job { Ok(()) } else { Err("still the old Job".into()) }
    })
    .await;
    wait_for("a Reloaded Event (core events, as upstream's RBAC allows)", RELOAD_WAIT, || async {
        let events = ns.api::<Event>().list(&Default::default()).await.map_err(|e| e.to_string())?;
        let reloaded = events.items.iter().any(|e| {
            e.reason.as_deref() == Some("Reloaded")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("auto")
        });
        if reloaded { Ok(()) } else { Err(format!("{} events", events.items.len())) }
    })
    .await;
    let record = reloader.wait_log("no patch permission on cronjobs.batch").await;
    assert!(record.contains("restart-safety record"), "{record}");
    // Exactly one rollout each: nothing keeps retrying what the RBAC forbids.
    Kind::Deployment.stays_at_revisions(&ns, "auto", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "late", 2).await;
    drop(reloader);
    delete_cluster_role(&ns, "reloader-reloader").await;
}

#[tokio::test]
async fn env_vars_strategy_with_upstreams_rbac() {
    every_core_reload_works_with_upstreams_rbac("env-vars").await;
}

#[tokio::test]
async fn annotations_strategy_with_upstreams_rbac() {
    every_core_reload_works_with_upstreams_rbac("annotations").await;
}

/// Issue 27, finding 4: the chart probes `/readyz`; under upstream's ClusterRole the forbidden workload watches
/// are served by listing on each change, so the pod must stay Ready and say it is degraded. Before, `/readyz`
/// turned 503 once the watches had failed for a minute, and the pod was Not Ready for good.
#[tokio::test]
async fn readiness_stays_ok_under_upstreams_rbac_and_names_what_is_degraded() {
    let ns = TestNamespace::create("upstream-rbac-ready").await;
    let kubeconfig = service_account_with_rules(&ns, "reloader-ready", upstream_v1_rules(), Scope::Cluster).await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    // A CronJob: upstream's RBAC grants no `patch` on them, so its restart-safety record is refused.
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let cronjob: k8s_openapi::api::batch::v1::CronJob = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "nightly", "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}}}
    }))
    .expect("cronjob");
    ns.api::<k8s_openapi::api::batch::v1::CronJob>()
        .create(&kube::api::PostParams::default(), &cronjob)
        .await
        .expect("create cronjob");
    let reloader = Reloader::start_with_env(&ns.name, &[], &[("KUBECONFIG", kubeconfig.as_str())]).await;
    reloader.wait_log("listing deployments.apps in a changed resource's namespace").await;
    let base = reloader.http_base().await;
    // CronJobs may not be watched either: a change in the namespace lists them, and the reload writes its record.
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("no patch permission on cronjobs.batch").await;
    // The watch failures count once they have lasted the bound (60 s) with 3 errors or more; until the body names
    // them, every answer must already be 200.
    let body =
        wait_for("/readyz to name the listed kinds as degraded", std::time::Duration::from_secs(180), || async {
            let (status, body) = http_get(&base, "/readyz").await;
            assert_eq!(status, 200, "/readyz under upstream's RBAC: {body}");
            let record = format!("cronjobs.batch in {}: no patch permission", ns.name);
            if body.contains("degraded") && body.contains("deployments.apps") && body.contains(&record) {
                Ok(body)
            } else {
                Err(body)
            }
        })
        .await;
    assert!(body.starts_with("ok"), "{body}");
    assert!(body.contains("restart-safety record not written"), "{body}");
    drop(reloader);
    delete_cluster_role(&ns, "reloader-ready").await;
}
