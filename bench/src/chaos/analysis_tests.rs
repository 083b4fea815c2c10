//! The definitions of RELIABILITY.md, case by case.

use super::*;

const MARK: &str = "app/STAKATER_CM_0_CONFIGMAP";

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A resource with contents h0…h{n} (h0 = creation), updates acknowledged at 1 s, 2 s, …, final = h{n}.
fn resource(n: usize) -> ResourceContents {
    ResourceContents {
        hashes: (0..=n).map(|i| format!("h{i}")).collect(),
        final_hash: format!("h{n}"),
        committed: (1..=n).map(|i| secs(i as f64)).collect(),
        commit_rv: (0..=n as u64).map(|i| i * 10).collect(),
    }
}

fn write(at: f64, hash: &str) -> TemplateWrite {
    TemplateWrite { at: secs(at), changed: vec![(MARK.into(), hash.into())], blind: false }
}

fn workload(writes: Vec<TemplateWrite>, final_hash: Option<&str>) -> WorkloadHistory {
    WorkloadHistory {
        label: "Deployment ns/w".into(),
        resource: 0,
        since: Duration::ZERO,
        writes,
        final_marks: Some(final_hash.map(|h| BTreeMap::from([(MARK.to_owned(), h.to_owned())])).unwrap_or_default()),
    }
}

#[test]
fn one_rollout_per_update_is_clean() {
    let w = workload(vec![write(1.1, "h1"), write(2.1, "h2"), write(3.1, "h3")], Some("h3"));
    let f = analyze(&[w], &[resource(3)], Some(secs(4.0)));
    assert_eq!((f.updates, f.expected, f.must_converge, f.rollouts), (3, 3, 1, 3));
    assert!(f.clean(), "{f:?}");
}

#[test]
fn coalesced_updates_folded_into_one_rollout_are_clean() {
    let w = workload(vec![write(3.5, "h3")], Some("h3"));
    let f = analyze(&[w], &[resource(3)], Some(secs(4.0)));
    assert_eq!((f.expected, f.rollouts), (3, 1));
    assert!(f.clean(), "{f:?}");
}

#[test]
fn rewriting_the_same_hash_is_a_duplicate() {
    // The annotations strategy rewriting `last-reloaded-from` with a new observedAt only.
    let same = TemplateWrite { at: secs(1.5), changed: vec![], blind: false };
    let w = workload(vec![write(1.1, "h1"), same], Some("h1"));
    let f = analyze(&[w], &[resource(1)], Some(secs(4.0)));
    assert_eq!((f.duplicates, f.same_hash, f.missed), (1, 1, 0));
    assert!(!f.clean());
}

#[test]
fn stepping_back_to_older_content_and_forward_again_counts_the_step_back() {
    let w = workload(vec![write(2.1, "h2"), write(2.2, "h1"), write(2.3, "h2")], Some("h2"));
    let f = analyze(&[w], &[resource(2)], Some(secs(4.0)));
    // h1 after h2 is stale; h2 again is not newer than h2: stale too.
    assert_eq!((f.stale, f.duplicates, f.rollouts), (2, 2, 3));
}

#[test]
fn an_unknown_hash_is_a_duplicate() {
    let w = workload(vec![write(1.1, "h1"), write(1.2, "not-ours")], Some("h1"));
    let f = analyze(&[w], &[resource(1)], Some(secs(4.0)));
    assert_eq!((f.unknown, f.duplicates), (1, 1));
}

#[test]
fn a_workload_without_the_final_hash_is_missed() {
    let w = workload(vec![write(1.1, "h1")], Some("h1"));
    let f = analyze(&[w], &[resource(2)], None);
    assert_eq!((f.missed, f.converged), (1, false));
    assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
}

#[test]
fn an_unchanged_resource_requires_nothing() {
    let w = workload(vec![], None);
    let f = analyze(&[w], &[resource(0)], Some(secs(1.0)));
    assert_eq!((f.must_converge, f.missed, f.expected), (0, 0, 0));
    assert!(f.clean());
}

#[test]
fn writes_after_convergence_are_spurious_not_duplicates() {
    let w = workload(vec![write(1.1, "h1"), write(9.0, "h1")], Some("h1"));
    let f = analyze(&[w], &[resource(1)], Some(secs(5.0)));
    assert_eq!((f.spurious, f.duplicates), (1, 0));
    assert!(!f.clean());
}

#[test]
fn blind_writes_are_counted_and_fail_the_run() {
    let mut blind = write(1.1, "h1");
    blind.blind = true;
    let f = analyze(&[workload(vec![blind], Some("h1"))], &[resource(1)], Some(secs(5.0)));
    assert_eq!((f.blind, f.duplicates), (1, 0));
    assert!(!f.clean());
}

#[test]
fn gone_workloads_have_their_writes_classified_but_need_not_converge() {
    let mut w = workload(vec![write(1.1, "h1"), write(1.2, "h1")], None);
    w.final_marks = None;
    let f = analyze(&[w], &[resource(2)], Some(secs(5.0)));
    assert_eq!((f.must_converge, f.missed, f.expected, f.stale), (0, 0, 0, 1));
}

#[test]
fn a_workload_created_mid_run_counts_only_later_updates() {
    let mut w = workload(vec![write(3.1, "h3")], Some("h3"));
    w.since = secs(2.5);
    let f = analyze(&[w], &[resource(3)], Some(secs(5.0)));
    assert_eq!((f.expected, f.must_converge), (1, 1));
    assert!(f.clean(), "{f:?}");
}

#[test]
fn contents_committed_out_of_send_order_are_ranked_by_commit_not_by_sequence() {
    // Two update tasks sent #2 and #3 at once; the API server committed #3 first (rv 30), then #2 (rv 40).
    let mut res = resource(3);
    res.commit_rv = vec![0, 10, 40, 30];
    res.final_hash = "h2".into();
    let w = workload(vec![write(1.1, "h1"), write(3.1, "h3"), write(3.2, "h2")], Some("h2"));
    let f = analyze(&[w], &[res.clone()], Some(secs(4.0)));
    assert!(f.clean(), "#3 then #2 is the commit order: {f:?}");
    // Rolling back to #3 after #2 is a stale duplicate.
    let w = workload(vec![write(1.1, "h1"), write(3.1, "h3"), write(3.2, "h2"), write(3.3, "h3")], Some("h2"));
    let f = analyze(&[w], &[res], Some(secs(4.0)));
    assert_eq!(f.stale, 1, "{f:?}");
}
