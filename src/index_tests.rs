//! Index behaviour as a replayed stream of watch observations: what reloads, what stays quiet.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::*;
use crate::{annotations::AnnotationKeys, hash, workload::summarise};

const NS: &str = "ns";

fn cm(name: &str, value: &str) -> (ConfigKey, ConfigFacts) {
    let data = [("k".to_owned(), value.to_owned())].into_iter().collect();
    let key = ConfigKey { kind: ConfigKind::ConfigMap, namespace: NS.into(), name: name.into() };
    (key, ConfigFacts { hash: hash::configmap(Some(&data), None), ignored: false, matched: false })
}

fn deployment(name: &str, annotations: serde_json::Value, env: serde_json::Value) -> (WorkloadKey, WorkloadSummary) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{
            "name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}], "env": env
        }]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
}

fn auto(name: &str) -> (WorkloadKey, WorkloadSummary) {
    deployment(name, json!({"reloader.stakater.com/auto": "true"}), json!([]))
}

fn plan(index: &mut Index, key: &WorkloadKey) -> Vec<(String, ContentHash)> {
    index.plan(key, DecisionSettings::default()).into_iter().map(|r| (r.config.name, r.hash)).collect()
}

#[test]
fn initial_sync_reloads_nothing_whatever_the_order() {
    for config_first in [true, false] {
        let mut index = Index::default();
        let (wk, ws) = auto("web");
        let (ck, cf) = cm("cfg", "v1");
        if config_first {
            index.upsert_config(ck, cf);
            index.upsert_workload(wk.clone(), ws);
        } else {
            index.upsert_workload(wk.clone(), ws);
            index.upsert_config(ck, cf);
        }
        assert!(plan(&mut index, &wk).is_empty(), "config_first={config_first}");
    }
}

#[test]
fn a_content_change_reloads_once_and_replays_converge() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1);
    index.upsert_workload(wk.clone(), ws);

    let (_, v2) = cm("cfg", "v2");
    assert_eq!(index.upsert_config(ck.clone(), v2), ConfigUpdate::Changed { old: v1.hash });
    assert_eq!(index.candidates(&ck), vec![wk.clone()]);
    let reloads = index.plan(&wk, DecisionSettings::default());
    assert_eq!(reloads.len(), 1);
    assert_eq!((reloads[0].previous, reloads[0].hash), (v1.hash, v2.hash));
    index.mark_applied(&wk, &reloads);

    // A duplicate event, a relist replay, a stale workload event: nothing more to do.
    assert_eq!(index.upsert_config(ck.clone(), v2), ConfigUpdate::Unchanged);
    assert!(plan(&mut index, &wk).is_empty());
    let (_, stale) = auto("web");
    index.upsert_workload(wk.clone(), stale);
    assert!(plan(&mut index, &wk).is_empty(), "a pre-patch event must not cause a second patch");
    // The watch echoes our env var: still nothing.
    let env = json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": v2.hash.to_string()}]);
    let (_, echoed) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    index.upsert_workload(wk.clone(), echoed);
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn a_restart_applies_changes_made_while_down_to_workloads_with_a_record() {
    // The workload was reloaded before (env var = v1); the config is v2 when the new process starts.
    let (_, v1) = cm("cfg", "v1");
    let (ck, v2) = cm("cfg", "v2");
    let env = json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": v1.hash.to_string()}]);
    let (wk, ws) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    let mut index = Index::default();
    index.upsert_workload(wk.clone(), ws);
    index.upsert_config(ck, v2);
    assert_eq!(plan(&mut index, &wk), vec![("cfg".to_owned(), v2.hash)]);
}

#[test]
fn a_restart_with_unchanged_configs_restarts_nothing() {
    let (ck, v1) = cm("cfg", "v1");
    let env = json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": v1.hash.to_string()}]);
    let (wk, ws) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    let mut index = Index::default();
    index.upsert_config(ck, v1);
    index.upsert_workload(wk.clone(), ws);
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn selecting_a_resource_later_does_not_by_itself_reload() {
    let mut index = Index::default();
    let (wk, plain) = deployment("web", json!({}), json!([]));
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1);
    index.upsert_workload(wk.clone(), plain);
    let (_, v2) = cm("cfg", "v2");
    index.upsert_config(ck, v2);
    assert!(plan(&mut index, &wk).is_empty(), "not selected: no reload, v2 becomes the baseline");
    let (_, annotated) = auto("web");
    assert!(index.upsert_workload(wk.clone(), annotated).relevant);
    assert!(plan(&mut index, &wk).is_empty(), "adding the annotation alone does not roll");
}

#[test]
fn metadata_only_changes_are_not_content_changes() {
    let mut index = Index::default();
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1);
    let ignored = ConfigFacts { ignored: true, ..v1 };
    assert_eq!(index.upsert_config(ck, ignored), ConfigUpdate::MetadataOnly);
}

#[test]
fn named_lists_find_unreferenced_resources_by_regex() {
    let mut index = Index::default();
    let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": "app-.*"}), json!([]));
    index.upsert_workload(wk.clone(), ws);
    let (ck, v1) = cm("app-settings", "v1");
    index.upsert_config(ck.clone(), v1);
    let (other, _) = cm("unrelated", "v1");
    assert_eq!(index.candidates(&ck), vec![wk.clone()]);
    assert!(index.candidates(&other).is_empty());
    let (_, v2) = cm("app-settings", "v2");
    index.upsert_config(ck, v2);
    assert_eq!(plan(&mut index, &wk), vec![("app-settings".to_owned(), v2.hash)]);
}

#[test]
fn a_recreated_workload_starts_from_a_fresh_baseline() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1);
    index.upsert_workload(wk.clone(), ws.clone());
    let (_, v2) = cm("cfg", "v2");
    index.upsert_config(ck, v2);
    assert!(index.delete_workload(&wk));
    index.upsert_workload(wk.clone(), WorkloadSummary { uid: "new".into(), ..ws });
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn new_annotation_problems_are_reported_once() {
    let mut index = Index::default();
    let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": "(bad"}), json!([]));
    assert_eq!(index.upsert_workload(wk.clone(), ws.clone()).new_problems.len(), 1);
    assert!(index.upsert_workload(wk, ws).new_problems.is_empty());
}
