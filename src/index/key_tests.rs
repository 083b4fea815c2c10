//! Key-level reloads in the index: views stand for the consumed keys, unconsumed changes stay quiet, opting in
//! and out roll nothing, and a missing view is asked for instead of guessed.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use serde_json::json;

use super::tests::NS;
use super::*;
use crate::rules::{annotations::AnnotationKeys, decision::DecisionSettings, hash, strategy::ReloadStrategy};
use crate::workload::summarise;

fn configmap(pairs: &[(&str, &str)]) -> ConfigMap {
    let data: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    serde_json::from_value(json!({"metadata": {"name": "cfg", "namespace": NS}, "data": data})).expect("cm")
}

fn cfg_key() -> ConfigKey {
    ConfigKey { kind: ConfigKind::ConfigMap, namespace: NS.into(), name: "cfg".into() }
}

/// A Deployment reading key `a` of `cfg` through `valueFrom`, with `annotations` and the applied-hashes record.
fn reader(annotations: serde_json::Value) -> (WorkloadKey, WorkloadSummary) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": NS, "uid": "uid-web", "annotations": annotations},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}]}]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
}

fn record(hash: ContentHash) -> String {
    format!("{{\"configmap/cfg\":\"{hash}\"}}")
}

fn keys_a() -> crate::rules::references::KeySet {
    Arc::from(vec!["a".to_owned()])
}

/// An index with the key registry, `cfg` at `pairs`, and the views the watch stream would compute.
fn observe(index: &mut Index, pairs: &[(&str, &str)]) -> ContentHash {
    let cm = configmap(pairs);
    let hash = hash::configmap(cm.data.as_ref(), None);
    index.upsert_config(cfg_key(), ConfigFacts::live(hash, false, false), Baseline::Current);
    let wanted = index.key_registry.wanted(&cfg_key());
    index.set_views(&cfg_key(), hash, configmap_views(&cm, &wanted));
    hash
}

fn view_a(value: &str) -> ContentHash {
    hash::configmap_keys(Some(&BTreeMap::from([("a".to_owned(), value.to_owned())])), None, Some(&["a".to_owned()]))
}

fn plan(index: &mut Index, key: &WorkloadKey) -> WorkloadPlan {
    index.plan(key, DecisionSettings::default(), ReloadStrategy::EnvVars)
}

const KEYS_USED: &str = "reloader.stakater.com/reload-on";

#[test]
fn a_key_level_reader_rolls_for_its_key_only_and_records_the_view() {
    let mut index = Index::default();
    let auto = json!({"reloader.stakater.com/auto": "true", KEYS_USED: "keys-used"});
    let (wk, ws) = reader(auto.clone());
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    assert_eq!(index.key_registry.wanted(&cfg_key()), vec![keys_a()], "the reader's key set is wanted");
    observe(&mut index, &[("a", "1"), ("b", "1")]);
    let first = plan(&mut index, &wk);
    assert!(first.reloads.is_empty());
    let recorded = first.applied_hashes.expect("the record, in the view's form");
    assert_eq!(recorded.get(&(ConfigKind::ConfigMap, "cfg".to_owned())), Some(&view_a("1")));

    // The object now carries that record; a change of `b` only: nothing.
    let mut with_record = auto.clone();
    with_record["reloader.stakater.com/applied-hashes"] = json!(record(view_a("1")));
    let (_, ws) = reader(with_record);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    observe(&mut index, &[("a", "1"), ("b", "2")]);
    assert!(plan(&mut index, &wk).is_empty(), "an unconsumed key changed");

    // A change of `a`: one reload, whose value is the hash of `a` alone.
    observe(&mut index, &[("a", "2"), ("b", "2")]);
    let reloads = plan(&mut index, &wk).reloads;
    assert_eq!(reloads.len(), 1);
    assert_eq!((reloads[0].hash, reloads[0].value, reloads[0].previous), (view_a("2"), view_a("2"), view_a("1")));
}

#[test]
fn opting_in_and_out_rolls_nothing_and_rewrites_the_record() {
    let mut index = Index::default();
    let (wk, ws) = reader(json!({"reloader.stakater.com/auto": "true"}));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    assert!(index.key_registry.wanted(&cfg_key()).is_empty(), "not opted in: no view wanted");
    let whole = observe(&mut index, &[("a", "1"), ("b", "1")]);

    // Opted in, the record holding the whole content's hash: current; the record takes the view's form.
    let opted_in = json!({"reloader.stakater.com/auto": "true", KEYS_USED: "keys-used",
                          "reloader.stakater.com/applied-hashes": record(whole)});
    let (_, ws) = reader(opted_in);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let p = plan(&mut index, &wk);
    assert_eq!(p.views_needed, vec![cfg_key()], "the view is read before anything is decided");
    assert!(p.reloads.is_empty());
    assert_eq!(p.applied_hashes, None, "the record is kept as it is meanwhile");
    let cm = configmap(&[("a", "1"), ("b", "1")]);
    index.set_views(&cfg_key(), whole, configmap_views(&cm, &[keys_a()]));
    let p = plan(&mut index, &wk);
    assert!(p.reloads.is_empty() && p.views_needed.is_empty());
    assert_eq!(p.applied_hashes.and_then(|r| r.values().next().copied()), Some(view_a("1")));

    // Opted out again with the view on record: current; the record takes the whole hash again.
    let opted_out = json!({"reloader.stakater.com/auto": "true", KEYS_USED: "any-key",
                           "reloader.stakater.com/applied-hashes": record(view_a("1"))});
    let (_, ws) = reader(opted_out);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    assert!(index.key_registry.wanted(&cfg_key()).is_empty(), "no longer wanted");
    let p = plan(&mut index, &wk);
    assert!(p.reloads.is_empty());
    assert_eq!(p.applied_hashes.and_then(|r| r.values().next().copied()), Some(whole));
}

#[test]
fn the_flag_opts_in_workloads_without_the_annotation_and_deletion_unregisters() {
    let mut index = Index::default();
    index.set_key_level(Arc::default(), true);
    let (wk, ws) = reader(json!({"reloader.stakater.com/auto": "true"}));
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    assert_eq!(index.key_registry.wanted(&cfg_key()), vec![keys_a()]);
    let (other, ws) = reader(json!({"reloader.stakater.com/auto": "true", KEYS_USED: "any-key"}));
    let other = WorkloadKey { name: "other".into(), ..other };
    index.upsert_workload(other, ws, Baseline::Current);
    assert_eq!(index.key_registry.wanted(&cfg_key()), vec![keys_a()], "one key set, once");
    index.delete_workload(&wk);
    assert!(index.key_registry.wanted(&cfg_key()).is_empty(), "the opted-out one wants none");
}

#[test]
fn a_bad_value_is_a_problem_and_the_flag_decides() {
    let (_, ws) = reader(json!({KEYS_USED: "some-keys"}));
    assert_eq!(ws.annotations.keys_used, None);
    let problem = ws.annotations.problems.first().expect("a problem");
    assert_eq!(problem.key, KEYS_USED);
    assert!(problem.message.contains("expected keys-used or any-key"), "{}", problem.message);
}

#[test]
fn a_workload_not_opted_in_is_not_fooled_by_another_readers_view() {
    // `cfg` holds only `a`; a key-level reader of `a` makes the index keep the view of `a`, which equals the
    // whole content's hash. A key gets added: the workload that did not opt in rolls, as upstream's would.
    let mut index = Index::default();
    let (key_level_reader, ws) = reader(json!({"reloader.stakater.com/auto": "true", KEYS_USED: "keys-used"}));
    index.upsert_workload(key_level_reader, ws, Baseline::Current);
    let whole = observe(&mut index, &[("a", "1")]);
    let (plain, ws) = reader(json!({"reloader.stakater.com/auto": "true",
                                    "reloader.stakater.com/applied-hashes": record(whole)}));
    let plain = WorkloadKey { name: "plain".into(), ..plain };
    index.upsert_workload(plain.clone(), ws, Baseline::Current);
    observe(&mut index, &[("a", "1"), ("b", "1")]);
    assert_eq!(plan(&mut index, &plain).reloads.len(), 1, "not opted in: any change rolls it");
}
