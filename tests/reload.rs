//! Reload behaviour on the real control plane, for Deployments, StatefulSets and DaemonSets: the `reloader`
//! binary runs scoped to the test's namespace; tests change ConfigMaps and Secrets and observe rollouts
//! (new ReplicaSets / ControllerRevisions) and the exact values written into pod templates.

mod common;

use common::*;
use serde_json::json;

const AUTO: (&str, &str) = ("reloader.stakater.com/auto", "true");

fn annotations(pairs: &[(&str, &str)]) -> serde_json::Value {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>().into()
}

async fn configmap_data_change_reloads_with_upstream_env_var(kind: Kind) {
    let ns = TestNamespace::create(&format!("cm-data-{kind:?}")).await;
    create_configmap(&ns, "app-config", &[("k", "v1")], &[]).await;
    kind.create(&ns, "web", annotations(&[AUTO]), json!({}), env_from_configmap("app-config")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    set_configmap_data(&ns, "app-config", &[("k", "v2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
    let value = kind.env(&ns, "web", "app", "STAKATER_APP_CONFIG_CONFIGMAP").await;
    assert_eq!(value.as_deref(), Some(configmap_hash(&[("k", "v2")]).as_str()));
    let line = reloader.wait_log("updated 'web' of type").await;
    assert!(line.contains("reason=auto: referenced via envFrom"), "{line}");

    // binaryData changes count too.
    let patch = json!({"binaryData": {"bin": "AAEC"}});
    api::<k8s_openapi::api::core::v1::ConfigMap>(&ns)
        .patch("app-config", &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .expect("patch binaryData");
    kind.wait_revisions(&ns, "web", 3).await;
}

async fn metadata_only_change_does_not_reload(kind: Kind) {
    let ns = TestNamespace::create(&format!("cm-meta-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "v1")], &[]).await;
    kind.create(&ns, "web", annotations(&[AUTO]), json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    let updates = reloader.events("update", "configmaps").await;
    touch_configmap_metadata(&ns, "cfg", &[("team", "a")], &[("note", "x")]).await;
    updates.wait_grown(1).await;
    kind.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "cfg", &[("k", "v2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
}

async fn secret_change_reloads_via_typed_auto_on_a_volume(kind: Kind) {
    let ns = TestNamespace::create(&format!("secret-{kind:?}")).await;
    create_secret(&ns, "db", &[("password", "one")], &[]).await;
    kind.create(
        &ns,
        "web",
        annotations(&[("secret.reloader.stakater.com/auto", "true")]),
        json!({}),
        volume_secret("db"),
    )
    .await;
    let _reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    set_secret_value(&ns, "db", "password", "two").await;
    kind.wait_revisions(&ns, "web", 2).await;
    let value = kind.env(&ns, "web", "app", "STAKATER_DB_SECRET").await;
    assert_eq!(value.as_deref(), Some(secret_hash(&[("password", "two")]).as_str()));
}

async fn auto_requires_a_reference_and_typed_auto_its_kind(kind: Kind) {
    let ns = TestNamespace::create(&format!("auto-ref-{kind:?}")).await;
    create_configmap(&ns, "used", &[("k", "1")], &[]).await;
    create_configmap(&ns, "unused", &[("k", "1")], &[]).await;
    create_secret(&ns, "sec", &[("k", "1")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "used"}}, {"secretRef": {"name": "sec"}}]}]});
    kind.create(&ns, "web", annotations(&[("configmap.reloader.stakater.com/auto", "true")]), json!({}), spec).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    let (configmaps, secrets) =
        (reloader.events("update", "configmaps").await, reloader.events("update", "secrets").await);
    set_configmap_data(&ns, "unused", &[("k", "2")]).await;
    set_secret_value(&ns, "sec", "k", "2").await;
    configmaps.wait_grown(1).await;
    secrets.wait_grown(1).await;
    kind.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "used", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
}

async fn named_list_reloads_unreferenced_matches_and_reports_bad_regex(kind: Kind) {
    let ns = TestNamespace::create(&format!("named-{kind:?}")).await;
    create_configmap(&ns, "app-settings", &[("k", "1")], &[]).await;
    create_configmap(&ns, "other", &[("k", "1")], &[]).await;
    create_secret(&ns, "token", &[("k", "1")], &[]).await;
    let named = [
        ("configmap.reloader.stakater.com/reload", "(broken, app-.*"),
        ("secret.reloader.stakater.com/reload", "token"),
    ];
    kind.create(&ns, "web", annotations(&named), json!({}), plain_pod()).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;
    let line = reloader.wait_log("invalid regex").await;
    for part in ["workload=web", "key=configmap.reloader.stakater.com/reload", "(broken"] {
        assert!(line.contains(part), "{part:?} missing from {line:?}");
    }

    let updates = reloader.events("update", "configmaps").await;
    set_configmap_data(&ns, "other", &[("k", "2")]).await;
    updates.wait_grown(1).await;
    kind.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "app-settings", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
    assert_eq!(
        kind.env(&ns, "web", "app", "STAKATER_APP_SETTINGS_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "2")]))
    );
    set_secret_value(&ns, "token", "k", "2").await;
    kind.wait_revisions(&ns, "web", 3).await;
}

async fn search_mode_needs_match_on_the_resource(kind: Kind) {
    let ns = TestNamespace::create(&format!("search-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    kind.create(
        &ns,
        "web",
        annotations(&[("reloader.stakater.com/search", "true")]),
        json!({}),
        env_from_configmap("cfg"),
    )
    .await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    let updates = reloader.events("update", "configmaps").await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    updates.wait_grown(1).await;
    kind.stays_at_revisions(&ns, "web", 1).await;
    let updates = reloader.events("update", "configmaps").await;
    touch_configmap_metadata(&ns, "cfg", &[], &[("reloader.stakater.com/match", "true")]).await;
    updates.wait_grown(1).await;
    kind.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
}

async fn ignore_on_the_resource_and_exclude_lists_win(kind: Kind) {
    let ns = TestNamespace::create(&format!("ignore-{kind:?}")).await;
    create_configmap(&ns, "ignored", &[("k", "1")], &[("reloader.stakater.com/ignore", "true")]).await;
    create_configmap(&ns, "excluded", &[("k", "1")], &[]).await;
    create_configmap(&ns, "normal", &[("k", "1")], &[]).await;
    create_secret(&ns, "excluded-secret", &[("k", "1")], &[]).await;
    let spec = json!({
        "containers": [{"name": "app", "image": "x", "envFrom": [
            {"configMapRef": {"name": "ignored"}}, {"configMapRef": {"name": "excluded"}}, {"configMapRef": {"name": "normal"}}],
            "volumeMounts": [{"name": "s", "mountPath": "/s"}, {"name": "c", "mountPath": "/c"}]}],
        "volumes": [{"name": "s", "secret": {"secretName": "excluded-secret"}}, {"name": "c", "configMap": {"name": "normal"}}]
    });
    let meta = [
        AUTO,
        ("configmaps.exclude.reloader.stakater.com/reload", "excluded"),
        ("secrets.exclude.reloader.stakater.com/reload", "other, excluded-secret"),
    ];
    kind.create(&ns, "web", annotations(&meta), json!({}), spec).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    let (configmaps, secrets) =
        (reloader.events("update", "configmaps").await, reloader.events("update", "secrets").await);
    set_configmap_data(&ns, "ignored", &[("k", "2")]).await;
    set_configmap_data(&ns, "excluded", &[("k", "2")]).await;
    set_secret_value(&ns, "excluded-secret", "k", "2").await;
    configmaps.wait_grown(2).await;
    secrets.wait_grown(1).await;
    kind.stays_at_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "normal", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
}

async fn pod_template_annotations_select_when_metadata_has_none(kind: Kind) {
    let ns = TestNamespace::create(&format!("tmpl-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    kind.create(&ns, "web", json!({}), annotations(&[AUTO]), env_from_configmap("cfg")).await;
    let _reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
}

async fn auto_reload_all_reloads_unannotated_workloads_except_auto_false(kind: Kind) {
    let ns = TestNamespace::create(&format!("all-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    kind.create(&ns, "plain", json!({}), json!({}), env_from_configmap("cfg")).await;
    kind.create(
        &ns,
        "optout",
        annotations(&[("reloader.stakater.com/auto", "false")]),
        json!({}),
        env_from_configmap("cfg"),
    )
    .await;
    let _reloader = Reloader::start(&ns.name, &["--auto-reload-all"]).await;
    kind.wait_revisions(&ns, "plain", 1).await;
    kind.wait_revisions(&ns, "optout", 1).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "plain", 2).await;
    kind.stays_at_revisions(&ns, "optout", 1).await;
}

async fn references_in_init_containers_env_value_from_and_projected_volumes(kind: Kind) {
    let ns = TestNamespace::create(&format!("refs-{kind:?}")).await;
    for cm in ["init-cfg", "env-cfg", "proj-cfg"] {
        create_configmap(&ns, cm, &[("k", "1")], &[]).await;
    }
    let spec = json!({
        "initContainers": [{"name": "init", "image": "x", "envFrom": [{"configMapRef": {"name": "init-cfg"}}]}],
        "containers": [
            {"name": "app", "image": "x"},
            {"name": "side", "image": "x",
             "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "env-cfg", "key": "k"}}}],
             "volumeMounts": [{"name": "p", "mountPath": "/p"}]}
        ],
        "volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "proj-cfg"}}]}}]
    });
    kind.create(&ns, "web", annotations(&[AUTO]), json!({}), spec).await;
    let _reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    set_configmap_data(&ns, "init-cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
    assert!(
        kind.env(&ns, "web", "app", "STAKATER_INIT_CFG_CONFIGMAP").await.is_some(),
        "init-container uses land on the first container"
    );
    set_configmap_data(&ns, "env-cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 3).await;
    assert!(kind.env(&ns, "web", "side", "STAKATER_ENV_CFG_CONFIGMAP").await.is_some());
    set_configmap_data(&ns, "proj-cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 4).await;
    assert!(kind.env(&ns, "web", "side", "STAKATER_PROJ_CFG_CONFIGMAP").await.is_some());
}

async fn annotations_strategy_writes_upstreams_last_reloaded_from(kind: Kind) {
    let ns = TestNamespace::create(&format!("annot-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    kind.create(&ns, "web", annotations(&[AUTO]), json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &["--reload-strategy=annotations"]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
    let template = kind.template(&ns, "web").await;
    let text = template
        .metadata
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("reloader.stakater.com/last-reloaded-from").cloned());
    let value: serde_json::Value = serde_json::from_str(&text.expect("annotation written")).expect("JSON");
    assert_eq!(value["type"], "CONFIGMAP");
    assert_eq!(value["name"], "cfg");
    assert_eq!(value["namespace"], ns.name.as_str());
    assert_eq!(value["hash"], configmap_hash(&[("k", "2")]).as_str());
    assert_eq!(value["containerRefs"], json!(["app"]));
    assert!(value["observedAt"].is_i64());
    assert_eq!(kind.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await, None, "no env var in annotations mode");

    // Unlike upstream v1's annotations mode, a restart does not reload again: the annotation records the hash.
    drop(reloader);
    let restarted = Reloader::start(&ns.name, &["--reload-strategy=annotations"]).await;
    restarted.wait_reconciled(1).await;
    kind.stays_at_revisions(&ns, "web", 2).await;
}

async fn stored_hashes_decide_at_startup_equal_is_left_alone_stale_is_applied_once(kind: Kind) {
    // As after a migration from upstream Reloader: the workloads carry STAKATER_* values it wrote.
    let ns = TestNamespace::create(&format!("stored-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let with_record = |hash: String| {
        json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}],
            "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": hash}]}]})
    };
    kind.create(&ns, "current", annotations(&[AUTO]), json!({}), with_record(configmap_hash(&[("k", "1")]))).await;
    kind.create(&ns, "stale", annotations(&[AUTO]), json!({}), with_record(configmap_hash(&[("k", "0")]))).await;
    kind.wait_revisions(&ns, "current", 1).await;
    kind.wait_revisions(&ns, "stale", 1).await;

    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "stale", 2).await;
    reloader.wait_reconciled(2).await;
    kind.stays_at_revisions(&ns, "current", 1).await;
    assert_eq!(reloader.count_log("updated 'current'"), 0, "stored hash equals the content: no patch");
    assert_eq!(reloader.count_log("updated 'stale'"), 1);

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "current", 2).await;
    kind.wait_revisions(&ns, "stale", 3).await;
    kind.stays_at_revisions(&ns, "current", 2).await;
    assert_eq!(reloader.count_log("updated 'current'"), 1);
    assert_eq!(reloader.count_log("updated 'stale'"), 2);
}

per_kind!(
    configmap_data_change_reloads_with_upstream_env_var,
    metadata_only_change_does_not_reload,
    secret_change_reloads_via_typed_auto_on_a_volume,
    auto_requires_a_reference_and_typed_auto_its_kind,
    named_list_reloads_unreferenced_matches_and_reports_bad_regex,
    search_mode_needs_match_on_the_resource,
    ignore_on_the_resource_and_exclude_lists_win,
    pod_template_annotations_select_when_metadata_has_none,
    auto_reload_all_reloads_unannotated_workloads_except_auto_false,
    references_in_init_containers_env_value_from_and_projected_volumes,
    annotations_strategy_writes_upstreams_last_reloaded_from,
    stored_hashes_decide_at_startup_equal_is_left_alone_stale_is_applied_once,
);
