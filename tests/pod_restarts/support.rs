//! What the pod-restart suites share (`tests/pod_restarts.rs`, `tests/pod_restart_guards.rs`): their workloads,
//! a slow "kubelet" that makes replacements take time to become Ready, and waits on Ready pods. Each suite uses a
//! part of it.
#![allow(dead_code)]

use std::{collections::BTreeMap, collections::BTreeSet, time::Duration};

use super::common::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::api::{ListParams, PostParams};
use serde_json::json;

pub const BOUNDARY: &str = "reloader.stakater.com/restart-pods-created-before";
pub const APPLIED: &str = "reloader.stakater.com/applied-hashes";

pub async fn create_deployment(ns: &TestNamespace, name: &str, replicas: i32, strategy: &str) {
    create_deployment_with(ns, name, replicas, strategy, json!({}), json!([])).await;
}

/// A Deployment whose pods KWOK makes Ready only once a test's "kubelet" lets each one ([`slow_kubelet`]).
pub async fn create_slow_deployment(ns: &TestNamespace, name: &str, replicas: i32, strategy: &str) {
    let env = json!([{"name": "STAKATER_TEST_HOLD", "value": "1"}]);
    create_deployment_with(ns, name, replicas, strategy, json!({ HELD: "" }), env).await;
}

/// Lets each pod of `app` become Ready once it has existed for `delay`: replacements take that long, so a
/// controller that restarted the next pod before the last one's replacement is Ready would have two down.
pub fn slow_kubelet(ns: &TestNamespace, app: &str, delay: Duration) -> tokio::task::JoinHandle<()> {
    let (pods, selector) = (ns.api::<Pod>(), format!("app={app},{HELD}"));
    tokio::spawn(async move {
        loop {
            let now = jiff::Timestamp::now();
            for pod in pods.list(&ListParams::default().labels(&selector)).await.map(|l| l.items).unwrap_or_default() {
                let created = pod.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
                let age = now.duration_since(created);
                if age >= jiff::SignedDuration::try_from(delay).unwrap_or_default() {
                    let _ = release_pod(&pods, &pod.metadata.name.unwrap_or_default()).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

pub async fn create_deployment_with(
    ns: &TestNamespace,
    name: &str,
    replicas: i32,
    strategy: &str,
    labels: serde_json::Value,
    env: serde_json::Value,
) {
    let mut pod_labels = json!({"app": name});
    pod_labels.as_object_mut().expect("labels").extend(labels.as_object().cloned().unwrap_or_default());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": strategy}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": pod_labels}, "spec": {"containers": [{"name": "app", "image": "x",
                "env": env, "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment");
    ns.api::<Deployment>().create(&PostParams::default(), &d).await.expect("create deployment");
}

/// Names of the workload's live (not terminating) pods, once `n` of them are Ready.
pub async fn ready_pods(ns: &TestNamespace, app: &str, n: usize) -> BTreeSet<String> {
    selected_ready(ns, &format!("app={app}"), n).await
}

/// Names of the pods `selector` finds, once there are `n` and every one is Ready.
pub async fn selected_ready(ns: &TestNamespace, selector: &str, n: usize) -> BTreeSet<String> {
    wait_for(&format!("{n} Ready pods of {selector}"), RELOAD_WAIT, || async {
        let pods = ns.api::<Pod>().list(&ListParams::default().labels(selector)).await;
        let pods = pods.map_err(|e| e.to_string())?.items;
        let ready: BTreeSet<String> =
            pods.iter().filter(|p| is_ready(p)).filter_map(|p| p.metadata.name.clone()).collect();
        if ready.len() == n && pods.len() == n {
            Ok(ready)
        } else {
            Err(format!("{} pods, {} ready", pods.len(), ready.len()))
        }
    })
    .await
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub async fn annotations(ns: &TestNamespace, name: &str) -> BTreeMap<String, String> {
    ns.api::<Deployment>().get(name).await.expect("deployment").metadata.annotations.unwrap_or_default()
}

/// A Deployment beside `web` whose pods carry `app=web` too (`track=<track>`): `web`'s selector finds them.
pub async fn create_neighbour(ns: &TestNamespace, name: &str, track: &str, schedulable: bool) {
    let labels = json!({"app": "web", "track": track});
    let node_selector = if schedulable { json!({}) } else { json!({"no-such-label": "on-any-node"}) };
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"nodeSelector": node_selector,
                "containers": [{"name": "app", "image": "x"}]}}}
    }))
    .expect("deployment");
    ns.api::<Deployment>().create(&PostParams::default(), &d).await.expect("create neighbour");
}
