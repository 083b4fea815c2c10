//! Which keys a reload names: the transitions from what the workload ran with to the current content.

use std::collections::BTreeMap;

use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use serde_json::json;

use super::tests::NS;
use super::*;
use crate::rules::{
    annotations::AnnotationKeys,
    decision::DecisionSettings,
    hash,
    keyprints::{ChangedKeys, configmap_digest},
    strategy::ReloadStrategy,
};
use crate::workload::summarise;

fn cfg() -> ConfigKey {
    ConfigKey { kind: ConfigKind::ConfigMap, namespace: NS.into(), name: "cfg".into() }
}

/// Observes `cfg` with `pairs`, as the observer does; returns its hash.
fn observe(index: &mut Index, pairs: &[(&str, &str)]) -> ContentHash {
    let data: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let cm = ConfigMap { data: Some(data), ..ConfigMap::default() };
    let hash = hash::configmap(cm.data.as_ref(), None);
    let before = index.config(&cfg()).cloned();
    let update = index.upsert_config(cfg(), ConfigFacts::live(hash, false, false), Baseline::Current);
    index.observe_keys(&cfg(), update, before, &configmap_digest(&cm));
    hash
}

fn web(record: Option<ContentHash>) -> (WorkloadKey, WorkloadSummary) {
    let mut annotations = json!({"reloader.stakater.com/auto": "true"});
    if let Some(h) = record {
        annotations["reloader.stakater.com/applied-hashes"] = json!(format!("{{\"configmap/cfg\":\"{h}\"}}"));
    }
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": NS, "uid": "uid-web", "annotations": annotations},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app",
            "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
}

fn named(index: &mut Index, key: &WorkloadKey) -> Option<ChangedKeys> {
    let plan = index.plan(key, DecisionSettings::default(), ReloadStrategy::EnvVars);
    assert_eq!(plan.reloads.len(), 1, "one reload");
    plan.reloads[0].changed_keys.as_deref().cloned()
}

fn keys(names: &[&str], removed: usize) -> Option<ChangedKeys> {
    Some(ChangedKeys { names: names.iter().map(|n| (*n).to_owned()).collect(), removed })
}

#[test]
fn a_reload_names_the_keys_of_the_change_it_applies() {
    let mut index = Index::default();
    let v1 = observe(&mut index, &[("a", "1"), ("b", "1"), ("c", "1")]);
    let (wk, ws) = web(Some(v1));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    observe(&mut index, &[("a", "1"), ("b", "2")]);
    assert_eq!(named(&mut index, &wk), keys(&["b"], 1));
}

#[test]
fn changes_coalesced_into_one_reload_are_named_together() {
    let mut index = Index::default();
    let v1 = observe(&mut index, &[("a", "1"), ("b", "1")]);
    let (wk, ws) = web(Some(v1));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    observe(&mut index, &[("a", "1"), ("b", "2")]);
    observe(&mut index, &[("a", "2"), ("b", "2")]);
    assert_eq!(named(&mut index, &wk), keys(&["a", "b"], 0));
}

#[test]
fn a_workload_further_behind_than_the_changes_known_names_none() {
    let mut index = Index::default();
    observe(&mut index, &[("a", "1")]);
    let older = hash::configmap(Some(&BTreeMap::from([("a".to_owned(), "0".to_owned())])), None);
    let (wk, ws) = web(Some(older));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    observe(&mut index, &[("a", "2")]);
    assert_eq!(named(&mut index, &wk), None, "from an unknown content: no names rather than wrong ones");
}
