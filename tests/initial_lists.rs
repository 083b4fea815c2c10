//! How the controller reads what exists at start (src/controller/initial_lists.rs, issue 39): streamed by an API
//! server that streams initial lists (the test cluster's), in pages by one that does not — a second control
//! plane started here with the `WatchList` feature gate off, as on Kubernetes before it — and a change reloads
//! on both.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace},
};
use kube::api::{Api, PostParams};
use serde_json::json;

/// A ConfigMap `cfg` and a Deployment `web` that reads it, in namespace `ns` of `client`'s cluster.
async fn configmap_and_deployment(client: &kube::Client, ns: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cfg"}, "data": {"k": "1"}})).expect("cm");
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.expect("create cm");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx",
                                                       "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment");
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create");
}

/// Changes `cfg` and waits for `web` to carry its hash.
async fn change_reloads(client: &kube::Client, ns: &str) {
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let patch = kube::api::Patch::Merge(json!({"data": {"k": "2"}}));
    cms.patch("cfg", &kube::api::PatchParams::default(), &patch).await.expect("change cfg");
    let hash = configmap_hash(&[("k", "2")]);
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    wait_for("web reloaded", RELOAD_WAIT, || async {
        let d = deployments.get("web").await.map_err(|e| e.to_string())?;
        let env = d.spec.and_then(|s| s.template.spec).and_then(|s| s.containers.into_iter().next()?.env);
        let value = env.unwrap_or_default().into_iter().find(|e| e.name == "STAKATER_CFG_CONFIGMAP");
        match value.and_then(|e| e.value) {
            Some(v) if v == hash => Ok(()),
            other => Err(format!("STAKATER_CFG_CONFIGMAP = {other:?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn initial_lists_are_streamed_where_the_api_server_streams_them() {
    let ns = TestNamespace::create("streamed").await;
    configmap_and_deployment(&ns.client, &ns.name).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    assert_eq!(reloader.count_log("initial lists are streamed by the API server"), 1, "{:?}", reloader.logs());
    change_reloads(&ns.client, &ns.name).await;
}

#[tokio::test]
async fn initial_lists_are_read_in_pages_where_the_api_server_does_not_stream_them() {
    let bin_dir = std::env::var_os("TESTENV_BIN_DIR").expect("run under `testenv run`, which sets TESTENV_BIN_DIR");
    let opts = testenv::cluster::Options {
        bin_dir: bin_dir.into(),
        state_dir: std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-watch-list"),
        nodes: 2,
        ready_timeout: Duration::from_secs(120),
        extra_apiserver_args: vec!["--feature-gates=WatchList=false".into()],
        extra_controller_manager_args: Vec::new(),
    };
    let mut plane = testenv::cluster::ControlPlane::start(&opts).await.expect("a control plane without WatchList");
    let client = plane.client().await.expect("its client");
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "paged"}})).expect("namespace");
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.expect("create namespace");
    configmap_and_deployment(&client, "paged").await;
    let kubeconfig = plane.kubeconfig.display().to_string();
    let reloader = Reloader::start_unscoped(&["--namespaces=paged"], &[("KUBECONFIG", &kubeconfig)]).await;
    let line = reloader.wait_log("initial lists are read in pages").await;
    assert!(line.contains("the API server does not stream them"), "{line}");
    change_reloads(&client, "paged").await;
    drop(reloader);
    plane.stop().await;
}
