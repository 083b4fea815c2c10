//! Create/delete events and scoping flags on the real control plane.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

const AUTO: &str = r#"{"reloader.stakater.com/auto": "true"}"#;

fn auto() -> serde_json::Value {
    serde_json::from_str(AUTO).expect("json")
}

#[tokio::test]
async fn reload_on_create_reloads_when_a_used_resource_appears_even_with_secrets_ignored() {
    let ns = TestNamespace::create("on-create").await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("late")).await;
    // upstream v1 never fires creates when one resource type is ignored (sharp edge); this must work.
    let reloader =
        Reloader::start_with_env(&ns.name, &["--resources-to-ignore=secrets"], &[("RELOAD_ON_CREATE", "true")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 1).await;
    create_configmap(&ns, "late", &[("k", "1")], &[]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_LATE_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "1")]))
    );
    assert_eq!(reloader.count_log("updated 'web'"), 1);
}

#[tokio::test]
async fn without_reload_on_create_a_new_resource_does_not_reload() {
    let ns = TestNamespace::create("no-on-create").await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("late")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    create_configmap(&ns, "late", &[("k", "1")], &[]).await;
    // This process counts one "add" per ConfigMap it first sees: as many as the namespace holds now, `late`
    // included (the namespace's kube-root-ca.crt may arrive at any time, so a count moving by one is not enough).
    let present = api::<ConfigMap>(&ns).list(&Default::default()).await.expect("list configmaps").items.len();
    let adds = events_received("add", "configmaps");
    wait_for(&format!("{adds} to reach {present}, `late` included"), RELOAD_WAIT, || async {
        let seen = sample(&reloader.metrics().await, &adds).unwrap_or(0.0);
        #[allow(clippy::cast_precision_loss)] // a few ConfigMaps
        let present = present as f64;
        if seen >= present { Ok(()) } else { Err(format!("{seen}")) }
    })
    .await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "late", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
}

#[tokio::test]
async fn reload_on_delete_removes_the_env_var() {
    let ns = TestNamespace::create("on-delete").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    let _reloader = Reloader::start(&ns.name, &["--reload-on-delete"]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert!(Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await.is_some());
    delete_configmap(&ns, "cfg").await;
    // The template returns to its first version, so the Deployment rolls back to its first ReplicaSet.
    wait_for("the STAKATER_ env var to be removed", RELOAD_WAIT, || async {
        match Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await {
            None => Ok(()),
            Some(v) => Err(format!("still {v}")),
        }
    })
    .await;
}

#[tokio::test]
async fn reload_on_delete_with_annotations_records_upstreams_delete_marker() {
    let ns = TestNamespace::create("on-delete-annot").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    let _reloader = Reloader::start(&ns.name, &["--reload-on-delete=true", "--reload-strategy=annotations"]).await;
    delete_configmap(&ns, "cfg").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let t = Kind::Deployment.template(&ns, "web").await;
    let text = t
        .metadata
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("reloader.stakater.com/last-reloaded-from").cloned())
        .expect("annotation");
    assert!(text.contains("aae45badef99284e4dae01d6046154ea9d99532f"), "{text}");
}

#[tokio::test]
async fn without_reload_on_delete_a_deletion_changes_nothing() {
    let ns = TestNamespace::create("no-on-delete").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let deletes = reloader.events("delete", "configmaps").await;
    delete_configmap(&ns, "cfg").await;
    deletes.wait_grown(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
}

#[tokio::test]
async fn resources_to_ignore_stops_that_type_only() {
    let ns = TestNamespace::create("ignore-type").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_secret(&ns, "sec", &[("k", "1")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "sec"}}]}]});
    Kind::Deployment.create(&ns, "web", auto(), json!({}), spec).await;
    let reloader = Reloader::start(&ns.name, &["--resources-to-ignore=configMaps"]).await;
    let secret_updates = reloader.events("update", "secrets").await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    // No ConfigMap event ever reaches it (a watch of them would have counted `cfg` in its first list), while it
    // does process what follows the change: a metadata-only write of the Secret.
    let note = json!({"metadata": {"annotations": {"note": "after the ConfigMap change"}}});
    api::<Secret>(&ns).patch("sec", &PatchParams::default(), &Patch::Merge(&note)).await.expect("annotate secret");
    secret_updates.wait_grown(1).await;
    let metrics = reloader.metrics().await;
    for t in ["add", "update", "delete"] {
        assert_eq!(sample(&metrics, &events_received(t, "configmaps")), None, "{t} ConfigMap events received");
    }
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    set_secret_value(&ns, "sec", "k", "2").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
}

#[tokio::test]
async fn resource_label_selector_limits_the_watched_resources() {
    let ns = TestNamespace::create("label-sel").await;
    create_configmap(&ns, "plain", &[("k", "1")], &[]).await;
    create_configmap(&ns, "labelled", &[("k", "1")], &[]).await;
    touch_configmap_metadata(&ns, "labelled", &[("reload", "yes")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "plain"}}, {"configMapRef": {"name": "labelled"}}]}]});
    Kind::Deployment.create(&ns, "web", auto(), json!({}), spec).await;
    let reloader = Reloader::start(&ns.name, &["--resource-label-selector=reload:yes"]).await;
    let updates = reloader.events("update", "configmaps").await;
    set_configmap_data(&ns, "plain", &[("k", "2")]).await;
    // A later metadata-only write of the labelled ConfigMap comes on the same watch, after where `plain`'s change
    // would: once it is counted, `plain`'s change was not delivered.
    touch_configmap_metadata(&ns, "labelled", &[], &[("note", "after plain's change")]).await;
    assert_eq!(updates.wait_grown(1).await, 1.0, "only the labelled ConfigMap's update is received");
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "labelled", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
}

#[tokio::test]
async fn helm_release_secrets_are_never_watched() {
    let ns = TestNamespace::create("helm-secret").await;
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "sh.helm.release.v1.app.v1"}, "type": "helm.sh/release.v1", "stringData": {"release": "a"}}))
        .expect("secret");
    api::<Secret>(&ns).create(&PostParams::default(), &s).await.expect("create");
    Kind::Deployment.create(&ns, "web", auto(), json!({}), volume_secret("sh.helm.release.v1.app.v1")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let (adds, updates) = (reloader.events("add", "secrets").await, reloader.events("update", "secrets").await);
    set_secret_value(&ns, "sh.helm.release.v1.app.v1", "release", "b").await;
    // A Secret created after it comes on the same watch, after where the release Secret's change would: once it
    // is counted, that change was not delivered.
    create_secret(&ns, "after", &[("k", "1")], &[]).await;
    adds.wait_grown(1).await;
    assert_eq!(updates.grown().await, 0.0, "the release Secret's update is not received");
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
}

#[tokio::test]
async fn namespace_selector_follows_label_changes_and_namespaces_to_ignore_wins() {
    // Global mode, isolated from other tests by a label unique to this test.
    let id = format!("sel-{}", std::process::id());
    let selected = TestNamespace::create_with_labels("ns-selected", &[("reloader-scope", &id)]).await;
    let ignored = TestNamespace::create_with_labels("ns-ignored", &[("reloader-scope", &id)]).await;
    let later = TestNamespace::create("ns-later").await;
    for ns in [&selected, &ignored, &later] {
        create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
        Kind::Deployment.create(ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    }
    let selector = format!("--namespace-selector=reloader-scope:{id}");
    let ignore = format!("--namespaces-to-ignore={}", ignored.name);
    let reloader = Reloader::start_unscoped(&[&selector, &ignore], &[]).await;
    // The selected namespace's change last: global mode watches ConfigMaps in one stream, so its reload shows the
    // controller processed the two changes before it.
    for ns in [&ignored, &later, &selected] {
        set_configmap_data(ns, "cfg", &[("k", "2")]).await;
    }
    Kind::Deployment.wait_revisions(&selected, "web", 2).await;
    Kind::Deployment.stays_at_revisions(&ignored, "web", 1).await;
    Kind::Deployment.stays_at_revisions(&later, "web", 1).await;

    // Labelling a namespace selects it from then on.
    let namespaces: Api<Namespace> = Api::all(later.client.clone());
    let patch = json!({"metadata": {"labels": {"reloader-scope": id}}});
    namespaces.patch(&later.name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("label namespace");
    reloader.wait_log(&format!("added namespace to be watched: {}", later.name)).await;
    set_configmap_data(&later, "cfg", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&later, "web", 2).await;
}

#[tokio::test]
async fn kubernetes_namespace_and_a_namespace_list_scope_the_controller() {
    let a = TestNamespace::create("scope-a").await;
    let b = TestNamespace::create("scope-b").await;
    let outside = TestNamespace::create("scope-outside").await;
    for ns in [&a, &b, &outside] {
        create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
        Kind::Deployment.create(ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    }
    // upstream v1's single-namespace mode, as its chart sets it with watchGlobally=false.
    let single = Reloader::start_unscoped(&[], &[("KUBERNETES_NAMESPACE", &a.name)]).await;
    set_configmap_data(&a, "cfg", &[("k", "2")]).await;
    set_configmap_data(&outside, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&a, "web", 2).await;
    Kind::Deployment.stays_at_revisions(&outside, "web", 1).await;
    drop(single);

    let list = format!("--namespaces={},{}", a.name, b.name);
    let _listed = Reloader::start_unscoped(&[&list], &[]).await;
    set_configmap_data(&b, "cfg", &[("k", "2")]).await;
    set_configmap_data(&outside, "cfg", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&b, "web", 2).await;
    Kind::Deployment.stays_at_revisions(&outside, "web", 1).await;
}
