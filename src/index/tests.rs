//! Index behaviour as a replayed stream of watch observations: what reloads, what stays quiet.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::*;
use crate::rules::{annotations::AnnotationKeys, decision::DecisionSettings, hash, strategy::ReloadStrategy};
use crate::workload::summarise;

pub(super) const NS: &str = "ns";

pub(super) fn cm(name: &str, value: &str) -> (ConfigKey, ConfigFacts) {
    let data = [("k".to_owned(), value.to_owned())].into_iter().collect();
    let key = ConfigKey { kind: ConfigKind::ConfigMap, namespace: NS.into(), name: name.into() };
    (key, ConfigFacts::live(hash::configmap(Some(&data), None), false, false))
}

pub(super) fn deployment(
    name: &str,
    annotations: serde_json::Value,
    env: serde_json::Value,
) -> (WorkloadKey, WorkloadSummary) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{
            "name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}], "env": env
        }]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
}

/// A template env list recording `hash` for ConfigMap `cfg`.
pub(super) fn recorded(hash: ContentHash) -> serde_json::Value {
    json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": hash.to_string()}])
}

pub(super) fn auto(name: &str) -> (WorkloadKey, WorkloadSummary) {
    deployment(name, json!({"reloader.stakater.com/auto": "true"}), json!([]))
}

pub(super) fn plan(index: &mut Index, key: &WorkloadKey) -> Vec<(String, ContentHash)> {
    full_plan(index, key).reloads.into_iter().map(|r| (r.config.name, r.hash)).collect()
}

pub(super) fn full_plan(index: &mut Index, key: &WorkloadKey) -> WorkloadPlan {
    index.plan(key, DecisionSettings::default(), ReloadStrategy::EnvVars)
}

#[test]
fn initial_sync_reloads_nothing_whatever_the_order() {
    for config_first in [true, false] {
        let mut index = Index::default();
        let (wk, ws) = auto("web");
        let (ck, cf) = cm("cfg", "v1");
        if config_first {
            index.upsert_config(ck, cf, Baseline::Current);
            index.upsert_workload(wk.clone(), ws, Baseline::Current);
        } else {
            index.upsert_workload(wk.clone(), ws, Baseline::Current);
            index.upsert_config(ck, cf, Baseline::Current);
        }
        assert!(plan(&mut index, &wk).is_empty(), "config_first={config_first}");
    }
}

#[test]
fn a_content_change_reloads_once_and_replays_converge() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);

    let (_, v2) = cm("cfg", "v2");
    assert_eq!(index.upsert_config(ck.clone(), v2.clone(), Baseline::Current), ConfigUpdate::Changed { old: v1.hash });
    assert_eq!(index.candidates(&ck), vec![wk.clone()]);
    let p = full_plan(&mut index, &wk);
    assert_eq!(p.reloads.len(), 1);
    assert_eq!((p.reloads[0].previous, p.reloads[0].hash), (v1.hash, v2.hash));
    index.mark_written(&wk, &p);

    // A duplicate event, a relist replay, a stale workload event: nothing more to do.
    assert_eq!(index.upsert_config(ck.clone(), v2.clone(), Baseline::Current), ConfigUpdate::Unchanged);
    assert!(plan(&mut index, &wk).is_empty());
    let (_, stale) = auto("web");
    index.upsert_workload(wk.clone(), stale, Baseline::Current);
    assert!(plan(&mut index, &wk).is_empty(), "a pre-patch event must not cause a second patch");
    // The watch echoes our env var: still nothing.
    let env = recorded(v2.hash);
    let (_, echoed) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    index.upsert_workload(wk.clone(), echoed, Baseline::Current);
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn a_restart_applies_changes_made_while_down_to_workloads_with_a_record() {
    // The workload was reloaded before (env var = v1); the config is v2 when the new process starts.
    let (_, v1) = cm("cfg", "v1");
    let (ck, v2) = cm("cfg", "v2");
    let env = recorded(v1.hash);
    let (wk, ws) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    let mut index = Index::default();
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    index.upsert_config(ck, v2.clone(), Baseline::Current);
    assert_eq!(plan(&mut index, &wk), vec![("cfg".to_owned(), v2.hash)]);
}

#[test]
fn a_restart_with_unchanged_configs_restarts_nothing() {
    let (ck, v1) = cm("cfg", "v1");
    let env = recorded(v1.hash);
    let (wk, ws) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    let mut index = Index::default();
    index.upsert_config(ck, v1, Baseline::Current);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn selecting_a_resource_later_does_not_by_itself_reload() {
    let mut index = Index::default();
    let (wk, plain) = deployment("web", json!({}), json!([]));
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1, Baseline::Current);
    index.upsert_workload(wk.clone(), plain, Baseline::Current);
    let (_, v2) = cm("cfg", "v2");
    index.upsert_config(ck, v2, Baseline::Current);
    assert!(plan(&mut index, &wk).is_empty(), "not selected: no reload, v2 becomes the baseline");
    let (_, annotated) = auto("web");
    assert!(index.upsert_workload(wk.clone(), annotated, Baseline::Current).relevant);
    assert!(plan(&mut index, &wk).is_empty(), "adding the annotation alone does not roll");
}

#[test]
fn metadata_only_changes_are_not_content_changes() {
    let mut index = Index::default();
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
    let ignored = ConfigFacts { ignored: true, ..v1 };
    assert_eq!(index.upsert_config(ck, ignored, Baseline::Current), ConfigUpdate::MetadataOnly);
}

/// The content's write time (for `evict-pods`' boundary) comes from the write that changed the content: a later
/// write of metadata only, or a relist, keeps it; a deletion makes it unknown (the controller's own time is used).
#[test]
fn a_reload_carries_when_its_content_was_written() {
    let at = |s: &str| s.parse::<jiff::Timestamp>().expect("time");
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1.clone().written(Some(at("2026-12-05T10:00:00Z"))), Baseline::Current);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let (_, v2) = cm("cfg", "v2");
    let changed = Some(at("2026-12-05T10:00:07Z"));
    index.upsert_config(ck.clone(), v2.clone().written(changed), Baseline::Current);
    let relabelled = ConfigFacts { ignored: false, matched: true, ..v2 }.written(Some(at("2026-12-05T10:00:09Z")));
    assert_eq!(index.upsert_config(ck.clone(), relabelled, Baseline::Current), ConfigUpdate::MetadataOnly);
    assert_eq!(index.config(&ck).and_then(ConfigFacts::written_at), changed);
    let reloads = full_plan(&mut index, &wk).reloads;
    assert_eq!(reloads.iter().map(|r| r.written_at).collect::<Vec<_>>(), vec![changed]);

    index.delete_config(&ck, true);
    assert_eq!(index.config(&ck).and_then(ConfigFacts::written_at), None, "deleted: when is not on the object");
    assert_eq!(v1.written(Some(at("2200-01-01T00:00:00Z"))).written_at(), None, "beyond four bytes: unknown");
}

#[test]
fn named_lists_find_unreferenced_resources_by_regex() {
    let mut index = Index::default();
    let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": "app-.*"}), json!([]));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let (ck, v1) = cm("app-settings", "v1");
    index.upsert_config(ck.clone(), v1, Baseline::Current);
    let (other, _) = cm("unrelated", "v1");
    assert_eq!(index.candidates(&ck), vec![wk.clone()]);
    assert!(index.candidates(&other).is_empty());
    let (_, v2) = cm("app-settings", "v2");
    index.upsert_config(ck, v2.clone(), Baseline::Current);
    assert_eq!(plan(&mut index, &wk), vec![("app-settings".to_owned(), v2.hash)]);
}

/// A list of plain names is looked up name by name, a list with a regex entry matched against the namespace:
/// both find the same resources, and a name that does not exist (yet) is found once it does.
#[test]
fn named_lists_of_plain_names_and_of_regexes_find_the_same_resources() {
    for list in ["^app-a$,app-b,missing", "app-(a|b)|missing"] {
        let mut index = Index::default();
        let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": list}), json!([]));
        index.upsert_workload(wk.clone(), ws, Baseline::Current);
        for name in ["app-a", "app-b", "app-c"] {
            let (ck, v1) = cm(name, "v1");
            index.upsert_config(ck, v1, Baseline::Current);
        }
        let (missing, v1) = cm("missing", "v1");
        index.upsert_config(missing, v1, Baseline::Current);
        for name in ["app-a", "app-b", "app-c", "missing"] {
            let (ck, v2) = cm(name, "v2");
            index.upsert_config(ck, v2, Baseline::Current);
        }
        let mut reloaded: Vec<String> = plan(&mut index, &wk).into_iter().map(|(name, _)| name).collect();
        reloaded.sort();
        assert_eq!(reloaded, ["app-a", "app-b", "missing"], "{list}");
        assert_eq!(index.candidates(&cm("app-b", "v2").0), vec![wk.clone()], "{list}");
        assert!(index.candidates(&cm("app-c", "v2").0).is_empty(), "{list}");
        // Gone with the workload, in both maps.
        index.delete_workload(&wk);
        let sizes: std::collections::BTreeMap<_, _> = index.map_sizes().into_iter().collect();
        assert_eq!((sizes["references"], sizes["named_list_namespaces"]), (0, 0), "{list}");
    }
}

#[test]
fn a_recreated_workload_starts_from_a_fresh_baseline() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1, Baseline::Current);
    index.upsert_workload(wk.clone(), ws.clone(), Baseline::Current);
    let (_, v2) = cm("cfg", "v2");
    index.upsert_config(ck, v2, Baseline::Current);
    assert!(index.delete_workload(&wk));
    index.upsert_workload(wk.clone(), WorkloadSummary { uid: "new".into(), ..ws }, Baseline::Current);
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn new_annotation_problems_are_reported_once() {
    let mut index = Index::default();
    let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": "(bad"}), json!([]));
    assert_eq!(index.upsert_workload(wk.clone(), ws.clone(), Baseline::Current).new_problems.len(), 1);
    assert!(index.upsert_workload(wk, ws, Baseline::Current).new_problems.is_empty());
}

#[test]
fn deletions_remove_env_vars_that_exist_and_only_those() {
    let (ck, v1) = cm("cfg", "v1");
    let env = recorded(v1.hash);
    let (with_var, ws_var) = deployment("with-var", json!({"reloader.stakater.com/auto": "true"}), env);
    let (without, ws_plain) = auto("without");
    let mut index = Index::default();
    index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
    index.upsert_workload(with_var.clone(), ws_var, Baseline::Current);
    index.upsert_workload(without.clone(), ws_plain, Baseline::Current);
    assert!(index.delete_config(&ck, true), "a live resource becomes a tombstone");
    assert!(!index.delete_config(&ck, true) || index.config(&ck).is_none());
    index.upsert_config(ck.clone(), v1, Baseline::Current);
    index.delete_config(&ck, true);
    let p = full_plan(&mut index, &with_var);
    assert_eq!(p.reloads.len(), 1);
    assert!(p.reloads[0].deleted && p.reloads[0].hash == ContentHash::delete_marker());
    assert!(full_plan(&mut index, &without).reloads.is_empty(), "no env var, nothing to remove");
    let annotations = index.plan(&without, DecisionSettings::default(), ReloadStrategy::Annotations);
    assert_eq!(annotations.reloads.len(), 1, "the annotations strategy records the delete marker (upstream v1)");
}

/// Issue 27, finding 6: churn leaves nothing behind. Kustomize-style hash-suffixed ConfigMaps matched by a
/// named list come and go (each reloading the workload), and workloads come and go in namespaces of their own:
/// every map is back to its size before the churn.
#[test]
fn churn_of_resources_and_namespaces_leaves_every_map_as_it_was() {
    let mut index = Index::default();
    let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": "app-.*"}), json!([]));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let before = index.map_sizes();
    for i in 0..100 {
        let (ck, cf) = cm(&format!("app-{i:05x}"), "v1");
        index.upsert_config(ck.clone(), cf, Baseline::Current);
        let (_, changed) = cm(&format!("app-{i:05x}"), "v2");
        index.upsert_config(ck.clone(), changed, Baseline::Current);
        let reloads = full_plan(&mut index, &wk);
        assert_eq!(reloads.reloads.len(), 1, "app-{i:05x}");
        index.mark_written(&wk, &reloads);
        index.delete_config(&ck, false);
    }
    for i in 0..50 {
        let namespace = index.intern(&format!("preview-{i}"));
        let (mut key, summary) = auto("web");
        key.namespace = namespace;
        index.upsert_workload(key.clone(), summary, Baseline::Current);
        let (mut ck, cf) = cm("cfg", "v1");
        ck.namespace = key.namespace.clone();
        index.upsert_config(ck.clone(), cf, Baseline::Current);
        // Changed once (its transition kept to name the keys of the reload) before the namespace goes.
        let (_, changed) = cm("cfg", "v2");
        let before_change = index.config(&ck).cloned();
        let update = index.upsert_config(ck.clone(), changed, Baseline::Current);
        let digest = crate::rules::keyprints::configmap_digest(&k8s_openapi::api::core::v1::ConfigMap::default());
        index.observe_keys(&ck, update, before_change, &digest);
        index.delete_config(&ck, false);
        index.delete_workload(&key);
    }
    index.forget_unused_namespaces();
    assert_eq!(index.map_sizes(), before);
}
