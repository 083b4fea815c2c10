use super::*;
use crate::rules::{hash::ContentHash, resource::ConfigKind};
use crate::workload::WorkloadKind;

fn w(name: &str) -> WorkloadKey {
    WorkloadKey { kind: WorkloadKind::Deployment, namespace: "ns".into(), name: name.into() }
}

fn secret() -> ConfigKey {
    ConfigKey { kind: ConfigKind::Secret, namespace: "ns".into(), name: "ca".into() }
}

fn peer(name: &str, wave: i32, rollout: RolloutState, runs_current: bool) -> Peer {
    Peer { key: w(name), wave, rollout, runs_current }
}

fn change(peers: Vec<Peer>, released: bool) -> Change {
    Change { resource: secret(), hold_id: "0123456789ab".into(), released, peers }
}

fn at(s: &str) -> jiff::Timestamp {
    s.parse().expect("timestamp")
}

fn gates(wave: i32, halt: Option<bool>, window: Option<&str>) -> RolloutGates {
    RolloutGates {
        wave,
        halt,
        window: window.map(|v| ReloadWindow::parse(v).expect("window")),
        ..RolloutGates::default()
    }
}

const NOW: &str = "2026-12-03T10:00:00Z"; // a Thursday

#[test]
fn a_failed_rollout_of_the_same_content_holds_the_others_only_when_halting() {
    let failed = change(vec![peer("a", 0, RolloutState::Failed, true)], false);
    let held = gate(&gates(0, None, None), true, std::slice::from_ref(&failed), at(NOW));
    assert_eq!(held, Some(Wait::Held { resource: secret(), failed: w("a"), hold_id: "0123456789ab".into() }));
    assert_eq!(
        held.map(|h| h.to_string()).as_deref(),
        Some(
            "held: the rollout of this change of Secret ns/ca failed on Deployment ns/a; it rolls when the \
             resource changes again, or annotate the resource reloader.stakater.com/release-hold=0123456789ab"
        )
    );
    assert_eq!(gate(&gates(0, None, None), false, std::slice::from_ref(&failed), at(NOW)), None, "flag off");
    assert!(
        gate(&gates(0, Some(true), None), false, std::slice::from_ref(&failed), at(NOW)).is_some(),
        "annotation on"
    );
    assert_eq!(
        gate(&gates(0, Some(false), None), true, std::slice::from_ref(&failed), at(NOW)),
        None,
        "annotation off"
    );
    let released = change(vec![peer("a", 0, RolloutState::Failed, true)], true);
    assert_eq!(gate(&gates(0, None, None), true, &[released], at(NOW)), None, "release-hold names it");
    // A workload failing with an older content is not a failure of this change.
    let older = change(vec![peer("a", 0, RolloutState::Failed, false)], false);
    assert_eq!(gate(&gates(0, None, None), true, &[older], at(NOW)), None);
}

#[test]
fn lower_waves_complete_before_higher_ones_start() {
    let pending = change(
        vec![peer("db", 0, RolloutState::Complete, false), peer("api", 1, RolloutState::Complete, false)],
        false,
    );
    let wait = gate(&gates(2, None, None), false, std::slice::from_ref(&pending), at(NOW));
    assert_eq!(wait, Some(Wait::Wave { wave: 2, resource: secret(), behind: (w("db"), 0) }), "the lowest first");
    assert_eq!(
        wait.map(|w| w.to_string()).as_deref(),
        Some("wave 2: waits for Deployment ns/db (wave 0) to complete its rollout of Secret ns/ca")
    );
    let rolling = change(vec![peer("db", 0, RolloutState::InProgress, true)], false);
    assert!(gate(&gates(1, None, None), false, &[rolling], at(NOW)).is_some(), "written, not complete");
    let done =
        change(vec![peer("db", 0, RolloutState::Complete, true), peer("web", 1, RolloutState::Complete, false)], false);
    assert_eq!(gate(&gates(1, None, None), false, &[done], at(NOW)), None, "same wave: no wait");
    let failed = change(vec![peer("db", 0, RolloutState::Failed, true)], false);
    assert_eq!(
        gate(&gates(1, None, None), false, std::slice::from_ref(&failed), at(NOW)),
        None,
        "no halting: a failure ends it"
    );
    assert!(matches!(gate(&gates(1, None, None), true, &[failed], at(NOW)), Some(Wait::Held { .. })));
}

#[test]
fn outside_its_window_a_reload_waits_until_it_opens() {
    let g = gates(0, None, Some("Mon-Fri 02:00-04:00 UTC"));
    let wait = gate(&g, false, &[change(vec![], false)], at(NOW));
    assert_eq!(
        wait,
        Some(Wait::Window { window: "Mon-Fri 02:00-04:00 UTC".into(), opens_at: Some(at("2026-12-04T02:00:00Z")) })
    );
    assert_eq!(gate(&g, false, &[change(vec![], false)], at("2026-12-04T03:59:59Z")), None);
}

#[test]
fn annotations_are_read_and_bad_values_reported_not_fatal() {
    let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<Map>();
    let mut problems = Vec::new();
    let ok = map(&[
        (annotation::ROLLOUT_WAVE, " 3 "),
        (annotation::HALT_ON_FAILED_ROLLOUT, "true"),
        (annotation::RELOAD_WINDOW, "Sat,Sun 00:00-24:00"),
    ]);
    let g = RolloutGates::extract(&ok, &mut problems);
    assert_eq!((g.wave, g.halt, g.window.is_some()), (3, Some(true), true));
    assert!(problems.is_empty(), "{problems:?}");
    assert!(RolloutGates::extract(&Map::new(), &mut problems).is_default());
    let bad = map(&[
        (annotation::ROLLOUT_WAVE, "-1"),
        (annotation::HALT_ON_FAILED_ROLLOUT, "yes"),
        (annotation::RELOAD_WINDOW, "Mo-Fr 02:00-04:00"),
    ]);
    let g = RolloutGates::extract(&bad, &mut problems);
    assert!(g.is_default(), "every bad value is ignored");
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, [annotation::ROLLOUT_WAVE, annotation::HALT_ON_FAILED_ROLLOUT, annotation::RELOAD_WINDOW]);
    assert_eq!(
        problems[0].message,
        "annotation \"reloader.stakater.com/rollout-wave\": \"-1\" is not a whole number ≥ 0; wave 0"
    );
}

#[test]
fn a_hold_is_released_by_its_id_or_a_longer_prefix() {
    let hash = ContentHash::parse_hex("0123456789abcdef0123456789abcdef01234567").expect("hex");
    assert_eq!(hold_id(&hash), "0123456789ab");
    assert!(releases("0123456789ab", &hash));
    assert!(releases(" 0123456789ABCDEF ", &hash));
    assert!(!releases("012345", &hash), "too short to name one content");
    assert!(!releases("1123456789ab", &hash));
    assert!(!releases("true", &hash));
}

/// `reloader.stakater.com/pause` (issue 29): on the workload, or its namespace's when it has none; first of all gates.
#[test]
fn a_paused_workload_or_namespace_waits_and_the_workloads_own_value_wins() {
    let failed = change(vec![peer("a", 0, RolloutState::Failed, true)], false);
    let paused = |pause, namespace_paused| RolloutGates { pause, namespace_paused, ..RolloutGates::default() };
    let wait = |g: &RolloutGates| gate(g, true, std::slice::from_ref(&failed), at(NOW));
    assert_eq!(wait(&paused(Some(true), false)), Some(Wait::Paused { namespace: false }));
    assert_eq!(wait(&paused(None, true)), Some(Wait::Paused { namespace: true }));
    assert!(matches!(wait(&paused(Some(false), true)), Some(Wait::Held { .. })), "not paused: the next gate");
    assert!(!paused(None, true).is_default() && !paused(Some(false), false).is_default());
    assert_eq!(
        Wait::Paused { namespace: true }.to_string(),
        "paused: its namespace has reloader.stakater.com/pause: \"true\"; it rolls once with the newest content when \
         lifted"
    );
    let mut problems = Vec::new();
    let read = RolloutGates::extract(&[(annotation::PAUSE.to_owned(), "sometimes".to_owned())].into(), &mut problems);
    assert_eq!(read.pause, None);
    assert_eq!(
        problems[0].message,
        "annotation \"reloader.stakater.com/pause\": \"sometimes\" is not true or false; reloads are not paused"
    );
}
