use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn upd(config: usize, hash: &str, sent: u64) -> Update {
    // Acknowledged 2 ms after sending: latencies start there.
    Update {
        config,
        hash: Some(hash.into()),
        sent: ms(sent),
        written: Some(ms(sent + 2)),
        order: sent,
        optional: false,
    }
}

fn dep(workload: usize, config: usize) -> Dependency {
    Dependency { workload, config, required_from: None, required_until: None }
}

fn obs(workload: usize, hash: &str, seen: u64, write: u64) -> Observation {
    Observation { workload, hash: hash.into(), seen: ms(seen), write }
}

#[test]
fn every_update_seen_once_is_exact_with_latencies() {
    let updates = [upd(0, "a1", 100), upd(1, "b1", 200), upd(0, "a2", 300)];
    let deps = [dep(0, 0), dep(1, 1), dep(2, 0)];
    let seen =
        [obs(0, "a1", 110, 1), obs(2, "a1", 125, 2), obs(1, "b1", 230, 3), obs(0, "a2", 305, 4), obs(2, "a2", 400, 5)];
    let (stats, mut lat) = analyze(&updates, &HashMap::new(), &deps, &seen);
    assert_eq!(stats, ActionStats { updates: 3, expected: 5, observed: 5, rollouts: 5, ..ActionStats::default() });
    assert!(stats.exact());
    lat.sort_by(f64::total_cmp);
    assert_eq!(lat, vec![3.0, 8.0, 23.0, 28.0, 98.0]);
}

#[test]
fn skipped_intermediate_content_is_superseded_and_a_lost_last_update_is_missed() {
    let updates = [upd(0, "a1", 100), upd(0, "a2", 150), upd(1, "b1", 200)];
    let deps = [dep(0, 0), dep(1, 1)];
    let seen = [obs(0, "a2", 190, 1)];
    let (stats, lat) = analyze(&updates, &HashMap::new(), &deps, &seen);
    assert_eq!(stats.expected, 3);
    assert_eq!(stats.observed, 1);
    assert_eq!(stats.superseded, 1);
    assert_eq!(stats.missed, 1);
    assert!(!stats.exact());
    assert!(!stats.correct());
    let (only_superseded, _) = analyze(&updates[..2], &HashMap::new(), &deps, &seen);
    assert_eq!((only_superseded.superseded, only_superseded.missed), (1, 0));
    assert!(only_superseded.correct() && !only_superseded.exact());
    assert_eq!(lat, vec![38.0]);
}

#[test]
fn repeats_foreign_hashes_and_creation_content_are_counted_apart() {
    let updates = [upd(0, "a1", 100), upd(1, "b1", 100)];
    let deps = [dep(0, 0), dep(1, 1)];
    let initial: HashMap<String, usize> = [("a0".to_owned(), 0)].into_iter().collect();
    let seen = [
        obs(0, "a1", 120, 1),
        obs(0, "a1", 140, 2), // same pair again: duplicate
        obs(0, "b1", 150, 3), // workload 0 does not use resource 1
        obs(1, "zz", 160, 4), // unknown content
        obs(1, "a0", 170, 5), // creation content
        obs(1, "b1", 180, 6),
    ];
    let (stats, _) = analyze(&updates, &initial, &deps, &seen);
    assert_eq!(
        stats,
        ActionStats {
            updates: 2,
            expected: 2,
            observed: 2,
            duplicates: 1,
            unexpected: 2,
            rolled_unchanged: 1,
            rollouts: 6,
            ..ActionStats::default()
        }
    );
    assert!(!stats.exact());
}

#[test]
fn metadata_only_updates_expect_nothing() {
    let updates = vec![Update { config: 0, hash: None, sent: ms(10), written: None, order: 0, optional: false }; 3];
    let (stats, lat) = analyze(&updates, &HashMap::new(), &[dep(0, 0)], &[]);
    assert_eq!(stats, ActionStats { updates: 3, ..ActionStats::default() });
    assert!(stats.exact());
    assert!(lat.is_empty());
}

#[test]
fn dependency_windows_make_pairs_outside_them_optional() {
    let updates = [upd(0, "a1", 100), upd(0, "a2", 2000), upd(0, "a3", 5000)];
    let deps = [Dependency { workload: 0, config: 0, required_from: Some(ms(1000)), required_until: Some(ms(3000)) }];
    let seen = [obs(0, "a1", 150, 1), obs(0, "a2", 2010, 2)];
    let (stats, lat) = analyze(&updates, &HashMap::new(), &deps, &seen);
    assert_eq!(stats.expected, 1);
    assert_eq!(stats.observed, 1);
    assert_eq!(stats.optional_observed, 1);
    assert_eq!(stats.missed, 0);
    assert_eq!(lat, vec![8.0]);
}

#[test]
fn several_marks_in_one_write_are_one_rollout() {
    let updates = [upd(0, "a1", 100), upd(1, "b1", 100)];
    let deps = [dep(0, 0), dep(0, 1)];
    let seen = [obs(0, "a1", 900, 7), obs(0, "b1", 900, 7)];
    let (stats, _) = analyze(&updates, &HashMap::new(), &deps, &seen);
    assert_eq!(stats.observed, 2);
    assert_eq!(stats.rollouts, 1);
}

#[test]
fn downtime_keeps_only_the_last_update_per_resource_required() {
    let mut updates = vec![
        upd(0, "a1", 100),  // before the downtime
        upd(0, "a2", 1100), // in it, replaced by a3
        upd(1, "b1", 1200), // in it, last of resource 1
        upd(0, "a3", 1500), // in it, last of resource 0
        upd(0, "a4", 2500), // after it
    ];
    mark_downtime_superseded(&mut updates, &[(ms(1000), ms(2000))]);
    let optional: Vec<bool> = updates.iter().map(|u| u.optional).collect();
    assert_eq!(optional, vec![false, true, false, false, false]);
    let deps = [dep(0, 0), dep(1, 1)];
    let seen = [obs(0, "a1", 120, 1), obs(1, "b1", 2100, 2), obs(0, "a3", 2100, 3), obs(0, "a4", 2520, 4)];
    let (stats, _) = analyze(&updates, &HashMap::new(), &deps, &seen);
    assert_eq!(stats.expected, 4);
    assert!(stats.exact(), "{stats:?}");
}

#[test]
fn commit_order_not_send_order_decides_what_superseded_what() {
    // Two concurrent writers: a2 was sent later but committed first, so a1 is the resource's final content.
    let mut a1 = upd(0, "a1", 100);
    let mut a2 = upd(0, "a2", 101);
    (a1.order, a2.order) = (20, 10);
    let deps = [dep(0, 0)];
    let (stats, _) = analyze(&[a1, a2], &HashMap::new(), &deps, &[obs(0, "a1", 150, 1)]);
    assert_eq!((stats.expected, stats.observed, stats.superseded, stats.missed), (2, 1, 1, 0));
    assert!(stats.correct());
}
