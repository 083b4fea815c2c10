//! Migration from upstream: the cluster state upstream Reloader leaves behind — `STAKATER_*` values it wrote,
//! `last-reloaded-from` annotations in both of its JSON shapes, workloads it never reloaded, its
//! `reloader-meta-info` ConfigMap and its Lease (held by a pod that is gone) — is taken over without a single
//! rollout; the next change then rolls each workload that uses it exactly once.

mod common;

use common::*;
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::api::PostParams;
use serde_json::json;

const LEASE: &str = "stakater-reloader-lock";

/// upstream's Lease, last renewed by a replica that no longer runs.
async fn upstream_lease(ns: &TestNamespace) {
    let renewed = MicroTime(jiff::Timestamp::now());
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE},
        "spec": {"holderIdentity": "reloader-reloader-7d9c8b6f5-x2x4q", "leaseDurationSeconds": 15,
                 "acquireTime": renewed, "renewTime": renewed, "leaseTransitions": 3}
    }))
    .expect("lease");
    ns.api::<Lease>().create(&PostParams::default(), &lease).await.expect("create lease");
}

/// upstream v1's meta-info ConfigMap.
async fn upstream_meta_info(ns: &TestNamespace) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "reloader-meta-info", "labels": {"reloader.stakater.com/meta-info": "reloader"}},
        "data": {"buildInfo": "{\"goVersion\":\"go1.22\",\"releaseVersion\":\"v1.4.21\"}",
                 "reloaderOptions": "{\"autoReloadAll\":false}", "deploymentInfo": "{}"}
    }))
    .expect("meta-info");
    ns.api::<ConfigMap>().create(&PostParams::default(), &cm).await.expect("create meta-info");
}

/// A container using ConfigMap `cfg` that carries the env var upstream wrote for it.
fn reloaded_by_upstream_env(hash: &str) -> serde_json::Value {
    json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}],
        "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": hash}]}]})
}

async fn takes_over_without_a_rollout(strategy: &str) {
    let ns = TestNamespace::create(&format!("migration-{strategy}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let hash = configmap_hash(&[("k", "1")]);
    let auto = json!({"reloader.stakater.com/auto": "true"});
    // What upstream wrote, in each strategy: v1's `type` JSON and v2's `kind` JSON for last-reloaded-from.
    Kind::Deployment.create(&ns, "env", auto.clone(), json!({}), reloaded_by_upstream_env(&hash)).await;
    let v1 = json!({"type": "CONFIGMAP", "name": "cfg", "namespace": ns.name, "hash": hash,
                    "containerRefs": ["app"], "observedAt": 1_764_000_000});
    let v1 = json!({"reloader.stakater.com/last-reloaded-from": v1.to_string()});
    Kind::StatefulSet.create(&ns, "annotated-v1", auto.clone(), v1, env_from_configmap("cfg")).await;
    let v2 = json!({"kind": "ConfigMap", "name": "cfg", "namespace": ns.name, "hash": hash,
                    "containers": ["app"], "observedAt": "2026-11-30T10:00:00Z"});
    let v2 = json!({"reloader.stakater.com/last-reloaded-from": v2.to_string()});
    Kind::DaemonSet.create(&ns, "annotated-v2", auto.clone(), v2, env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "never-reloaded", auto, json!({}), env_from_configmap("cfg")).await;
    upstream_meta_info(&ns).await;
    upstream_lease(&ns).await;
    let workloads = [
        (Kind::Deployment, "env"),
        (Kind::StatefulSet, "annotated-v1"),
        (Kind::DaemonSet, "annotated-v2"),
        (Kind::Deployment, "never-reloaded"),
    ];
    for (kind, name) in workloads {
        kind.wait_revisions(&ns, name, 1).await;
    }

    let args = [
        format!("--reload-strategy={strategy}"),
        "--enable-ha".into(),
        "--leader-election-lease-duration=3s".into(),
        "--leader-election-renew-deadline=2s".into(),
        "--leader-election-retry-period=1s".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [
        ("POD_NAME", "reloader-reloader-5f6d7c8b9-abcde"),
        ("POD_NAMESPACE", ns.name.as_str()),
        ("RELOADER_NAMESPACE", ns.name.as_str()),
    ];
    let reloader = Reloader::start_with_env(&ns.name, &args, &env).await;
    // upstream's holder is gone: the Lease is taken once it expires, by this controller's own clock.
    reloader.wait_log("became leader").await;
    reloader.wait_log("published meta info configmap").await;
    for (kind, name) in workloads {
        kind.stays_at_revisions(&ns, name, 1).await;
    }
    assert_eq!(reloader.count_log("Changes detected"), 0, "{}", reloader.logs().join("\n"));

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    for (kind, name) in workloads {
        kind.wait_revisions(&ns, name, 2).await;
    }
    for (kind, name) in workloads {
        kind.stays_at_revisions(&ns, name, 2).await;
    }
    assert_eq!(reloader.count_log("Changes detected"), workloads.len());
}

#[tokio::test]
async fn from_upstream_with_env_vars() {
    takes_over_without_a_rollout("env-vars").await;
}

#[tokio::test]
async fn from_upstream_with_annotations() {
    takes_over_without_a_rollout("annotations").await;
}
