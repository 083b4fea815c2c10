//! The workloads every RBAC case reloads — one of each kind the chart's configuration enables — and what of their
//! reloads has not happened yet: the case's evidence that every rule it needs is there.

use k8s_openapi::api::{
    batch::v1::{CronJob, Job},
    core::v1::{ConfigMap, Pod},
    events::v1::Event,
};
use kube::{
    Api, ResourceExt,
    api::{ListParams, PostParams},
};
use serde_json::json;

use crate::common::{csi::*, custom::*, *};

/// One workload of each enabled kind, all auto-annotated, using ConfigMap `cfg`, Secret `sec` (full variant) or
/// the CSI class `vault`. Returns the Job's UID (full variant).
pub async fn create_workloads(ns: &TestNamespace, full: bool) -> String {
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let uses = json!({"containers": [{"name": "app", "image": "x",
        "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "sec"}}]}]});
    create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
    create_secret(ns, "sec", &[("k", "1")], &[]).await;
    for kind in [Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet] {
        kind.create(ns, &format!("{kind:?}").to_lowercase(), auto.clone(), json!({}), uses.clone()).await;
    }
    let mut job_spec = uses.clone();
    job_spec["restartPolicy"] = json!("Never");
    let cronjob: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "cron", "annotations": auto},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {"spec": job_spec}}}}
    }))
    .expect("cronjob");
    api::<CronJob>(ns).create(&PostParams::default(), &cronjob).await.expect("create cronjob");
    if !full {
        return String::new();
    }
    create_custom(ns, &rollouts(), "rollout", auto.clone(), uses.clone()).await;
    create_custom(ns, &deployment_configs(), "dc", auto.clone(), uses.clone()).await;
    create_custom(ns, &clonesets(), "cloneset", auto.clone(), uses.clone()).await;
    for strategy in ["evict-pods", "delete-pods"] {
        let annotations =
            json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": strategy});
        Kind::Deployment.create(ns, strategy, annotations, json!({}), uses.clone()).await;
    }
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "job", "annotations": auto},
        "spec": {"backoffLimit": 0, "template": {"spec": job_spec}}
    }))
    .expect("job");
    let job_uid = api::<Job>(ns).create(&PostParams::default(), &job).await.expect("create job").uid();
    create_class(ns, "vault", json!({})).await;
    Kind::Deployment.create(ns, "csi", auto, json!({}), mounts("vault")).await;
    // The cluster's own controllers create that pod, not this one: under `make test`'s load, with every RBAC case's
    // workloads created at once, it once took more than RELOAD_WAIT (30 s).
    wait_for("a pod of the csi Deployment", 3 * RELOAD_WAIT, || async {
        let pods = ns.api::<Pod>().list(&ListParams::default().labels("app=csi")).await.map_err(|e| e.to_string())?;
        if pods.items.is_empty() { Err("none".to_owned()) } else { Ok(()) }
    })
    .await;
    write_pod_statuses(ns, "csi", "vault", "1").await;
    job_uid.unwrap_or_default()
}

/// What has not been reloaded yet (empty when everything has).
pub async fn missing_reloads(ns: &TestNamespace, full: bool, old_job_uid: &str, reloader: &Reloader) -> Vec<String> {
    let mut missing = Vec::new();
    let cm_hash = configmap_hash(&[("k", "2")]);
    for kind in [Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet] {
        let name = format!("{kind:?}").to_lowercase();
        if kind.env(ns, &name, "app", "STAKATER_CFG_CONFIGMAP").await.as_deref() != Some(cm_hash.as_str()) {
            missing.push(format!("{kind:?} reload"));
        }
    }
    // Each watch syncs on its own, so the ConfigMap change reloads these even without the Secrets rule: the
    // Secret's own change must show too.
    let secret = secret_hash(&[("k", "2")]);
    if full
        && Kind::Deployment.env(ns, "deployment", "app", "STAKATER_SEC_SECRET").await.as_deref()
            != Some(secret.as_str())
    {
        missing.push("Secret reload".into());
    }
    let custom = match full {
        true => vec![(rollouts(), "rollout"), (deployment_configs(), "dc"), (clonesets(), "cloneset")],
        false => vec![],
    };
    for (resource, name) in custom {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        let template = api.get(name).await.map(|o| o.data["spec"]["template"].to_string()).unwrap_or_default();
        if !template.contains(&cm_hash) {
            missing.push(format!("{} reload", resource.kind));
        }
    }
    let jobs = api::<Job>(ns).list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    if !jobs.iter().any(|j| j.owner_references().iter().any(|o| o.kind == "CronJob" && o.name == "cron")) {
        missing.push("CronJob reload (a Job from it)".into());
    }
    if full && !jobs.iter().any(|j| j.name_any() == "job" && j.uid().as_deref() != Some(old_job_uid)) {
        missing.push("Job reload (recreated)".into());
    }
    if full && reloader.count_log("Job recreation is not crash-safe") > 0 {
        missing.push("a crash-safe Job reload (its recreation recorded in Secret reloader-owed-jobs)".into());
    }
    // A pod restarted (evicted, or deleted) shows every rule they need was there (GET the workload, LIST its pods,
    // evict or delete); the end of the restarts is `tests/pod_restarts.rs`'s to show, not waited for here: with a
    // dozen controllers at once the API server answers slowly.
    for (strategy, done) in [("evict-pods", "evicted"), ("delete-pods", "deleted")].into_iter().filter(|_| full) {
        if reloader.count_log(&format!("{done} pod {strategy}-")) == 0 {
            missing.push(format!("{strategy} restarts"));
        }
    }
    if full && Kind::Deployment.revisions(ns, "csi").await < 2 {
        missing.push("CSI reload".into());
    }
    if api::<ConfigMap>(ns).get_opt("reloader-meta-info").await.ok().flatten().is_none() {
        missing.push("the meta-info ConfigMap".into());
    }
    let events = api::<Event>(ns).list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    if !events.iter().any(|e| {
        e.reason.as_deref() == Some("Reloaded")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("deployment")
    }) {
        missing.push("a Reloaded Event".into());
    }
    missing
}
