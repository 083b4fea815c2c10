//! Proves the local control plane is real: controllers roll out, the scheduler binds, KWOK runs pods,
//! Jobs complete, namespaces finalize.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet},
    batch::v1::{CronJob, Job},
    core::v1::{Namespace, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testenv::harness::{TestNamespace, wait_for};

const WAIT: Duration = Duration::from_secs(60);

fn pod_template(app: &str) -> serde_json::Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/fake:1"}]}
    })
}

async fn running_pods(ns: &TestNamespace, app: &str) -> usize {
    let pods: Api<Pod> = ns.api();
    let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.expect("list pods");
    list.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count()
}

async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).expect("valid object");
    api.create(&PostParams::default(), &obj).await.expect("create")
}

#[tokio::test]
async fn deployment_rolls_out_a_new_replicaset_when_its_template_changes() {
    let ns = TestNamespace::create("smoke-deploy").await;
    let deployments: Api<Deployment> = ns.api();
    create(
        &deployments,
        json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": pod_template("web")}
        }),
    )
    .await;
    wait_for("2 Running pods of Deployment web", WAIT, || async {
        let n = running_pods(&ns, "web").await;
        if n == 2 { Ok(()) } else { Err(format!("{n} Running")) }
    })
    .await;

    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"smoke": "v2"}}}}});
    deployments.patch("web", &PatchParams::default(), &Patch::Strategic(&patch)).await.expect("patch");
    let replicasets: Api<ReplicaSet> = ns.api();
    wait_for("a second ReplicaSet and a completed rollout", WAIT, || async {
        let rs = replicasets.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let d = deployments.get("web").await.map_err(|e| e.to_string())?;
        let status = d.status.unwrap_or_default();
        let done = status.updated_replicas == Some(2)
            && status.available_replicas == Some(2)
            && status.replicas == Some(2)
            && status.observed_generation == d.metadata.generation;
        if rs.items.len() == 2 && done {
            Ok(())
        } else {
            Err(format!("{} ReplicaSets, status {status:?}", rs.items.len()))
        }
    })
    .await;
}

#[tokio::test]
async fn statefulset_and_daemonset_get_running_pods() {
    let ns = TestNamespace::create("smoke-sts-ds").await;
    create(&ns.api::<StatefulSet>(), json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": pod_template("db")}
    }))
    .await;
    create(
        &ns.api::<DaemonSet>(),
        json!({
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": pod_template("agent")}
        }),
    )
    .await;
    wait_for("2 Running StatefulSet pods", WAIT, || async {
        let n = running_pods(&ns, "db").await;
        if n == 2 { Ok(()) } else { Err(format!("{n} Running")) }
    })
    .await;
    wait_for("a Running DaemonSet pod on each of the 2 KWOK nodes", WAIT, || async {
        let n = running_pods(&ns, "agent").await;
        if n >= 2 { Ok(()) } else { Err(format!("{n} Running")) }
    })
    .await;
}

#[tokio::test]
async fn a_manual_job_from_a_cronjob_runs_to_completion() {
    let ns = TestNamespace::create("smoke-cron").await;
    let cron = create(
        &ns.api::<CronJob>(),
        json!({
            "metadata": {"name": "nightly"},
            "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.invalid/fake:1"}]}
            }}}}
        }),
    )
    .await;
    let jobs: Api<Job> = ns.api();
    create(&jobs, json!({
        "metadata": {"name": "nightly-manual", "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                                 "uid": cron.uid().expect("uid"), "controller": true}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.invalid/fake:1"}]}}}
    }))
    .await;
    wait_for("Job nightly-manual to complete", WAIT, || async {
        let job = jobs.get("nightly-manual").await.map_err(|e| e.to_string())?;
        let status = job.status.unwrap_or_default();
        if status.succeeded == Some(1) { Ok(()) } else { Err(format!("{status:?}")) }
    })
    .await;
}

#[tokio::test]
async fn namespace_deletion_finishes() {
    let ns = TestNamespace::create("smoke-nsdel").await;
    let deployments: Api<Deployment> = ns.api();
    create(
        &deployments,
        json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": pod_template("web")}
        }),
    )
    .await;
    wait_for("a Running pod", WAIT, || async {
        if running_pods(&ns, "web").await == 1 { Ok(()) } else { Err("not yet".into()) }
    })
    .await;
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    namespaces.delete(&ns.name, &Default::default()).await.expect("delete namespace");
    wait_for("the namespace to be gone", WAIT, || async {
        match namespaces.get_opt(&ns.name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(n) => Err(format!("phase {:?}", n.status.and_then(|s| s.phase))),
        }
    })
    .await;
}
