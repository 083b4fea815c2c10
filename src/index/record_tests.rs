//! The `applied-hashes` record and what it makes safe: the baseline written on first sight, changes made while
//! the controller was down applied exactly once, a rejected write not retried, a change made while opted out
//! never applied later, the record trusted before an older template, and an echo that outruns its write.

use std::collections::BTreeMap;

use serde_json::json;

use super::{
    tests::{auto, cm, deployment, full_plan, plan, recorded},
    *,
};

pub(super) fn with_applied_hashes(mut ws: WorkloadSummary, pairs: &[(&str, ContentHash)]) -> WorkloadSummary {
    ws.applied_hashes = pairs.iter().map(|(n, h)| ((ConfigKind::ConfigMap, (*n).to_owned()), *h)).collect();
    ws
}

#[test]
fn first_sight_records_the_baseline_on_the_object_once() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck, v1.clone(), Baseline::Current);
    index.upsert_workload(wk.clone(), ws.clone(), Baseline::Current);
    let p = full_plan(&mut index, &wk);
    assert!(p.reloads.is_empty());
    let expected: BTreeMap<_, _> = [((ConfigKind::ConfigMap, "cfg".to_owned()), v1.hash)].into_iter().collect();
    assert_eq!(p.applied_hashes, Some(expected.clone()), "baseline written to metadata");
    index.mark_written(&wk, &p);
    assert!(full_plan(&mut index, &wk).is_empty(), "not written twice while the echo is pending");
    index.upsert_workload(wk.clone(), with_applied_hashes(ws, &[("cfg", v1.hash)]), Baseline::Current);
    assert!(full_plan(&mut index, &wk).is_empty(), "nothing to write once the object carries it");
}

#[test]
fn a_change_made_while_down_reaches_a_never_reloaded_workload_exactly_once() {
    // The previous process recorded the baseline v1 in metadata; the config is v2 when this one starts.
    let (_, v1) = cm("cfg", "v1");
    let (ck, v2) = cm("cfg", "v2");
    let (wk, ws) = auto("web");
    let mut index = Index::default();
    index.upsert_workload(wk.clone(), with_applied_hashes(ws.clone(), &[("cfg", v1.hash)]), Baseline::Current);
    index.upsert_config(ck, v2.clone(), Baseline::Current);
    let p = full_plan(&mut index, &wk);
    assert_eq!(p.reloads.iter().map(|r| (r.previous, r.hash)).collect::<Vec<_>>(), vec![(v1.hash, v2.hash)]);
    index.mark_written(&wk, &p);
    assert!(full_plan(&mut index, &wk).is_empty());
    // The echo of the patch: env var and metadata both say v2.
    let env = recorded(v2.hash);
    let (_, echoed) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    index.upsert_workload(wk.clone(), with_applied_hashes(echoed, &[("cfg", v2.hash)]), Baseline::Current);
    assert!(full_plan(&mut index, &wk).is_empty());
}

#[test]
fn stale_baselines_reload_unrecorded_pairs_for_create_and_sync_after_restart() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let (ck, v1) = cm("cfg", "v1");
    assert_eq!(index.upsert_config(ck, v1.clone(), Baseline::Stale), ConfigUpdate::Created);
    assert_eq!(plan(&mut index, &wk), vec![("cfg".to_owned(), v1.hash)], "reload-on-create");

    let mut index = Index::default();
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck, v1.clone(), Baseline::Current);
    let (wk, ws) = auto("web");
    index.upsert_workload(wk.clone(), ws, Baseline::Stale);
    assert_eq!(plan(&mut index, &wk), vec![("cfg".to_owned(), v1.hash)], "sync-after-restart");

    // A recorded pair is in sync whatever the baseline mode.
    let mut index = Index::default();
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck, v1.clone(), Baseline::Current);
    let env = recorded(v1.hash);
    let (wk, ws) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), env);
    index.upsert_workload(wk.clone(), ws, Baseline::Stale);
    assert!(plan(&mut index, &wk).is_empty());
}

#[test]
fn a_rejected_write_is_not_attempted_again_until_something_changes() {
    let mut index = Index::default();
    let (wk, ws) = auto("web");
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
    index.upsert_workload(wk.clone(), ws.clone(), Baseline::Current);
    let (_, v2) = cm("cfg", "v2");
    index.upsert_config(ck.clone(), v2, Baseline::Current);
    let p = full_plan(&mut index, &wk);
    assert_eq!(p.reloads.len(), 1);
    index.mark_rejected(&wk, &p);
    assert!(full_plan(&mut index, &wk).reloads.is_empty(), "same write, same rejection: not again");
    index.upsert_workload(wk.clone(), with_applied_hashes(ws.clone(), &[("cfg", v1.hash)]), Baseline::Current);
    assert!(full_plan(&mut index, &wk).reloads.is_empty(), "our own record's echo changes nothing");
    let (_, v3) = cm("cfg", "v3");
    index.upsert_config(ck, v3.clone(), Baseline::Current);
    assert_eq!(plan(&mut index, &wk), vec![("cfg".to_owned(), v3.hash)], "a new change is attempted");
}

#[test]
fn a_change_made_while_opted_out_is_never_applied_not_even_after_opting_back_in_or_a_restart() {
    // Rolled with v1 (template and record say so); the ConfigMap is then ignored and changed to v2.
    let (_, v1) = cm("cfg", "v1");
    let (ck, v2) = cm("cfg", "v2");
    let auto_true = json!({"reloader.stakater.com/auto": "true"});
    let (wk, ws) = deployment("web", auto_true.clone(), recorded(v1.hash));
    let ws = with_applied_hashes(ws, &[("cfg", v1.hash)]);
    let mut index = Index::default();
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let ignored = ConfigFacts { ignored: true, ..v2.clone() };
    index.upsert_config(ck.clone(), ignored, Baseline::Current);
    let p = full_plan(&mut index, &wk);
    assert!(p.reloads.is_empty(), "ignored: no rollout");
    let expected: BTreeMap<_, _> = [((ConfigKind::ConfigMap, "cfg".to_owned()), v2.hash)].into_iter().collect();
    assert_eq!(p.applied_hashes, Some(expected), "the record follows the content while opted out");
    index.mark_written(&wk, &p);
    let (_, echoed) = deployment("web", auto_true.clone(), recorded(v1.hash));
    let echoed = with_applied_hashes(echoed, &[("cfg", v2.hash)]);
    index.upsert_workload(wk.clone(), echoed.clone(), Baseline::Current);

    // Opting back in (the ignore removed) rolls nothing, now or after a restart (a fresh index).
    index.upsert_config(ck.clone(), v2.clone(), Baseline::Current);
    assert!(full_plan(&mut index, &wk).is_empty(), "opted back in");
    let mut restarted = Index::default();
    restarted.upsert_workload(wk.clone(), echoed, Baseline::Current);
    restarted.upsert_config(ck.clone(), v2, Baseline::Current);
    assert!(full_plan(&mut restarted, &wk).is_empty(), "after a restart");

    // The next real change rolls once.
    let (_, v3) = cm("cfg", "v3");
    restarted.upsert_config(ck, v3.clone(), Baseline::Current);
    assert_eq!(plan(&mut restarted, &wk), vec![("cfg".to_owned(), v3.hash)]);
}

#[test]
fn the_metadata_record_is_trusted_before_an_older_template_value() {
    // `kubectl rollout undo` put back a template saying v1; the record says the controller applied v2, the
    // current content: the undo is the user's and is left alone (upstream does not react to it either).
    let (_, v1) = cm("cfg", "v1");
    let (ck, v2) = cm("cfg", "v2");
    let (wk, ws) = deployment("web", json!({"reloader.stakater.com/auto": "true"}), recorded(v1.hash));
    let mut index = Index::default();
    index.upsert_workload(wk.clone(), with_applied_hashes(ws, &[("cfg", v2.hash)]), Baseline::Current);
    index.upsert_config(ck, v2, Baseline::Current);
    assert!(full_plan(&mut index, &wk).is_empty());
}

/// The watch can deliver a write before the worker marks it written (the event races the PATCH response): the
/// object then already shows it, and nothing would clear a "written, not yet echoed" entry made after (the
/// soak scenario found 8 of 20 workloads holding one).
#[test]
fn a_write_echoed_before_it_is_marked_leaves_nothing_pending() {
    let mut index = Index::default();
    let (ck, cf) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), cf, Baseline::Current);
    let (wk, ws) = auto("web");
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let (_, changed) = cm("cfg", "v2");
    index.upsert_config(ck, changed, Baseline::Current);
    let plan = full_plan(&mut index, &wk);
    assert_eq!(plan.reloads.len(), 1);
    // The echo: the template carries the new value, the metadata the new record.
    let record = crate::rules::strategy::encode_applied_hashes(plan.applied_hashes.as_ref().expect("a record"));
    let env = json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": plan.reloads[0].value.to_string()}]);
    let (_, echoed) = deployment(
        "web",
        json!({"reloader.stakater.com/auto": "true",
        "reloader.stakater.com/applied-hashes": record}),
        env,
    );
    index.upsert_workload(wk.clone(), echoed, Baseline::Current);
    index.mark_written(&wk, &plan);
    let sizes: std::collections::BTreeMap<_, _> = index.map_sizes().into_iter().collect();
    assert_eq!(sizes["unechoed"], 0);
    assert!(full_plan(&mut index, &wk).is_empty(), "nothing left to write");
}
