//! Unit tests of the work queue.

use super::*;

fn queue() -> WorkQueue<&'static str> {
    WorkQueue::new(Duration::from_millis(10), Duration::from_millis(40))
}

#[tokio::test]
async fn duplicates_collapse_and_keep_the_earliest_trigger() {
    let q = queue();
    let t0 = Instant::now();
    q.add("a", t0 + Duration::from_millis(5));
    q.add("a", t0);
    q.add("b", t0);
    assert_eq!(q.len(), 2);
    assert_eq!(q.next().await.map(|(k, t)| (k, t.at)), Some(("a", t0)));
    assert_eq!(q.next().await.map(|(k, _)| k), Some("b"));
    assert!(q.is_empty());
}

#[tokio::test]
async fn a_key_added_while_in_flight_runs_again_after_done() {
    let q = queue();
    q.add("a", Instant::now());
    let (k, _) = q.next().await.expect("a");
    q.add("a", Instant::now());
    assert!(q.is_empty(), "not handed to a second worker while in flight");
    q.done(&k);
    assert_eq!(q.next().await.map(|(k, _)| k), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially_up_to_the_cap() {
    let q = queue();
    let t0 = Instant::now();
    q.add("a", t0);
    let mut delays = Vec::new();
    for _ in 0..4 {
        let (k, at) = q.next().await.expect("a");
        assert_eq!(at.at, t0, "the first trigger time survives retries");
        delays.push(q.retry(&k, at, Duration::ZERO).1);
    }
    assert_eq!(delays, [10, 20, 40, 40].map(Duration::from_millis));
    let (k, _) = q.next().await.expect("a again");
    q.done(&k);
    q.add("a", t0);
    let (k, at) = q.next().await.expect("a");
    assert_eq!(q.retry(&k, at, Duration::ZERO).1, Duration::from_millis(10), "success resets the backoff");
}

#[tokio::test(start_paused = true)]
async fn delayed_adds_coalesce_within_the_window() {
    let q = queue();
    let t0 = Instant::now();
    q.add_after("a", t0, Duration::from_millis(100));
    tokio::time::advance(Duration::from_millis(50)).await;
    q.add_after("a", t0 + Duration::from_millis(50), Duration::from_millis(100));
    assert!(q.is_empty(), "nothing before the window ends");
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(q.len(), 1, "one run for both triggers, at the end of the first window");
    assert_eq!(q.next().await.map(|(k, t)| (k, t.at)), Some(("a", t0)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(q.is_empty(), "the second trigger did not schedule another run");
}

#[tokio::test]
async fn background_keys_wait_for_the_first_lane_and_a_change_promotes_them() {
    let q = queue();
    let t0 = Instant::now();
    q.add_background("record-a", t0);
    q.add_background("record-b", t0);
    q.add_background("record-c", t0);
    q.add("change", t0);
    q.add("record-c", t0); // a change of a background key: promoted
    q.add_background("change", t0); // already waiting: stays in the first lane
    let mut order = Vec::new();
    for _ in 0..4 {
        let (k, _) = q.next().await.expect("key");
        q.done(&k);
        order.push(k);
    }
    assert_eq!(order, ["change", "record-c", "record-a", "record-b"]);
    assert!(q.is_empty());
}

#[tokio::test]
async fn a_promoted_key_takes_the_changes_trigger_not_the_relists() {
    let q = queue();
    let relist = Instant::now();
    let change = relist + Duration::from_millis(50);
    q.add_background("a", relist);
    q.add("a", change);
    q.add("a", change + Duration::from_millis(5));
    assert_eq!(q.next().await.map(|(k, t)| (k, t.at)), Some(("a", change)), "the change's, kept against later ones");
}

#[tokio::test]
async fn a_promoted_key_runs_once_and_its_old_background_place_is_skipped() {
    let q = queue();
    let t0 = Instant::now();
    for k in ["a", "b", "c"] {
        q.add_background(k, t0);
    }
    q.add("b", t0);
    assert_eq!(q.len(), 3);
    let (k, _) = q.next().await.expect("key");
    assert_eq!(k, "b");
    q.done(&k);
    q.add_background("b", t0); // back in the background lane, behind its stale place
    let mut order = Vec::new();
    while !q.is_empty() {
        let (k, _) = q.next().await.expect("key");
        q.done(&k);
        order.push(k);
    }
    assert_eq!(order, ["a", "b", "c"], "b once, at its first place (the later one is then stale)");
    assert_eq!(q.len(), 0);
}

#[tokio::test]
async fn a_key_promoted_while_in_flight_runs_again_in_the_first_lane() {
    let q = queue();
    let t0 = Instant::now();
    q.add_background("a", t0);
    let (k, _) = q.next().await.expect("key");
    q.add_background("a", t0); // waits for its run to end
    q.add_background("x", t0);
    q.add("a", t0); // promoted while in flight
    q.done(&k);
    assert_eq!(q.next().await.map(|(k, _)| k), Some("a"), "first lane before x");
}

#[tokio::test]
async fn change_work_is_a_waiting_change_or_anything_in_flight() {
    let q = queue();
    let t0 = Instant::now();
    q.add_background("record", t0);
    assert!(!q.has_change_work(), "waiting background work alone does not hold events back");
    q.add("change", t0);
    assert!(q.has_change_work());
    let (k, _) = q.next().await.expect("key");
    assert_eq!(k, "change");
    assert!(q.has_change_work(), "in flight");
    q.done(&k);
    assert!(!q.has_change_work());
    let (k, _) = q.next().await.expect("key");
    assert!(q.has_change_work(), "background work being written counts");
    q.done(&k);
    assert!(!q.has_change_work());
}

/// The publisher of Events waits on this signal instead of polling `has_change_work`.
#[tokio::test]
async fn settled_is_signalled_when_the_last_change_work_finishes_not_before() {
    let q = queue();
    let settled = q.settled_signal();
    let t0 = Instant::now();
    q.add("a", t0);
    q.add("b", t0);
    let wait = settled.notified();
    tokio::pin!(wait);
    wait.as_mut().enable();
    let (a, _) = q.next().await.expect("key");
    q.done(&a);
    assert!(futures::poll!(wait.as_mut()).is_pending(), "b still waits");
    let (b, _) = q.next().await.expect("key");
    q.add("b", t0);
    q.done(&b);
    assert!(futures::poll!(wait.as_mut()).is_pending(), "b was re-added while in flight");
    let (b, _) = q.next().await.expect("key");
    q.done(&b);
    assert!(futures::poll!(wait.as_mut()).is_ready(), "nothing waits or is in flight");
    assert!(!q.has_change_work());
}

#[tokio::test]
async fn shut_down_drains_then_ends() {
    let q = queue();
    q.add("a", Instant::now());
    q.shut_down();
    q.add("b", Instant::now());
    assert_eq!(q.next().await.map(|(k, _)| k), Some("a"));
    assert_eq!(q.next().await, None);
}

#[tokio::test(start_paused = true)]
async fn a_coalesced_change_of_a_background_key_jumps_the_background_lane() {
    let q = queue();
    let t0 = Instant::now();
    for k in ["record-a", "record-b", "changed"] {
        q.add_background(k, t0);
    }
    q.add_after("changed", t0, Duration::from_secs(1)); // the default coalescing window
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(q.next().await.map(|(k, _)| k), Some("changed"), "served before the background keys");
}

#[tokio::test(start_paused = true)]
async fn absurd_delays_wait_at_most_a_day_and_never_overflow() {
    let q = queue();
    q.add_after("paused-for-centuries", Instant::now(), Duration::MAX);
    tokio::time::sleep(MAX_DELAY + Duration::from_millis(1)).await;
    assert_eq!(q.next().await.map(|(k, _)| k), Some("paused-for-centuries"));
}

#[tokio::test(start_paused = true)]
async fn a_coalesced_change_waits_for_quiet_never_past_the_cap() {
    let (quiet, cap) = (Duration::from_millis(200), Duration::from_secs(1));
    let q = queue();
    let t0 = Instant::now();
    // A single change waits only the quiet period.
    q.add_coalesced("single", t0, quiet, cap);
    tokio::time::sleep(Duration::from_millis(190)).await;
    assert!(q.is_empty());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(q.next().await.map(|(k, t)| (k, t.at)), Some(("single", t0)));
    // `kubectl apply -f dir/`: writes 100 ms apart join one run, due 200 ms after the last.
    for _ in 0..3 {
        q.add_coalesced("apply", t0, quiet, cap);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(q.is_empty(), "still within the quiet period of the last write");
    tokio::time::sleep(Duration::from_millis(110)).await;
    assert_eq!(q.next().await.map(|(k, _)| k), Some("apply"));
    // A resource changing every 100 ms forever: served at the cap.
    let start = tokio::time::Instant::now();
    while q.is_empty() {
        q.add_coalesced("busy", t0, quiet, cap);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(start.elapsed() >= cap && start.elapsed() < cap + Duration::from_millis(150), "{:?}", start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_at_least_the_servers_retry_after() {
    let q = queue();
    q.add("a", Instant::now());
    let (k, at) = q.next().await.expect("a");
    assert_eq!(q.retry(&k, at, Duration::from_secs(3)).1, Duration::from_secs(3), "Retry-After beats the backoff");
}

/// Issue 27, finding 2: the wall-clock second a write carries is read once, when the trigger enters the queue;
/// attempts seconds apart (a retry after a lost response) write exactly it, so the retry rolls nothing.
#[tokio::test]
async fn every_attempt_of_a_trigger_carries_the_same_wall_clock_second() {
    let q = WorkQueue::new(Duration::from_millis(600), Duration::from_millis(600));
    q.add("a", Instant::now());
    let (k, first) = q.next().await.expect("a");
    // Far enough apart that computing the second anew would give another one about half the time or more.
    q.retry(&k, first, Duration::ZERO);
    let (k, second) = q.next().await.expect("a, retried");
    q.retry(&k, second, Duration::ZERO);
    let (_, third) = q.next().await.expect("a, retried again");
    assert_eq!([second, third], [first, first]);
    // A later trigger of the same key while it waits keeps the first one's time.
    let q = queue();
    let t0 = Instant::now();
    q.add("b", t0);
    q.add("b", t0 + Duration::from_secs(5));
    let (_, t) = q.next().await.expect("b");
    assert_eq!(t.at, t0);
}

/// Issue 38, finding 6: a retry keeps its trigger's time for the content its first attempt carried; newer content
/// picked up by a retry (a change that joined the waiting retry) takes a later time, so a `restartedAt` written
/// with it differs from the one the first attempt may have landed with.
#[tokio::test]
async fn a_retry_that_carries_newer_content_writes_a_later_mark() {
    let q = WorkQueue::new(Duration::ZERO, Duration::ZERO);
    q.add("a", Instant::now());
    let (k, mut first) = q.next().await.expect("a");
    let wall = first.wall;
    assert_eq!(first.mark_for(1, wall), wall, "the first attempt writes the trigger's time");
    q.retry(&k, first, Duration::ZERO);
    while q.is_empty() {
        tokio::task::yield_now().await;
    }
    // A change while the retry waits in the queue joins it: the earliest trigger is kept, with what its attempt
    // carried.
    q.add("a", Instant::now() + Duration::from_secs(5));
    let (_, mut retried) = q.next().await.expect("a, retried");
    assert_eq!((retried.wall, retried.carried), (wall, Some(1)));
    assert_eq!(retried.clone().mark_for(1, wall), wall, "the same content: the same time, which changes nothing");
    let later = retried.mark_for(2, wall);
    assert_eq!(later, wall.checked_add(jiff::SignedDuration::from_millis(1)).expect("time"), "newer content");
    let now = wall.checked_add(jiff::SignedDuration::from_secs(3)).expect("time");
    assert_eq!(retried.mark_for(3, now), now, "a newer one again: now, which is later");
}

/// Background work takes one worker at most; a run that wrote only a record holds the lane for RECORD_PACE,
/// one that wrote nothing does not, and changes are served all along (issue 39).
#[tokio::test(start_paused = true)]
async fn background_work_runs_one_at_a_time_and_records_are_paced() {
    let q = queue();
    let t0 = Instant::now();
    for k in ["a", "b", "c"] {
        q.add_background(k, t0);
    }
    let (a, _) = q.next().await.expect("key");
    assert_eq!(a, "a");
    let second = tokio::time::timeout(Duration::from_secs(1), q.next()).await;
    assert!(second.is_err(), "b waits while a is in flight: {second:?}");
    q.pace_background(&a);
    q.done(&a);
    let start = tokio::time::Instant::now();
    q.add("change", t0);
    assert_eq!(q.next().await.map(|(k, _)| k), Some("change"), "a change is not paced");
    q.done(&"change");
    let (b, _) = q.next().await.expect("key");
    assert_eq!((b, start.elapsed()), ("b", RECORD_PACE), "b waits for the pace of a's record");
    q.done(&b); // wrote nothing: no pace
    let (c, _) = q.next().await.expect("key");
    assert_eq!((c, start.elapsed()), ("c", RECORD_PACE));
    q.pace_background(&"x"); // not the background key in flight: no effect
    q.done(&c);
    assert!(q.is_empty());
}

/// A background key whose change is being coalesced is left to the coalesced add: run from the background lane
/// during the window, its reconcile would write the first change without the ones still to come.
#[tokio::test(start_paused = true)]
async fn a_background_key_waits_for_the_window_of_its_coalesced_change() {
    let q = queue();
    let t0 = Instant::now();
    q.add_background("web", t0);
    q.add_coalesced("web", t0, Duration::from_secs(5), Duration::from_secs(5));
    let start = tokio::time::Instant::now();
    assert_eq!(q.next().await.map(|(k, _)| k), Some("web"));
    assert_eq!(start.elapsed(), Duration::from_secs(5), "served when the window ends, not from the background lane");
    q.done(&"web");
    assert!(q.is_empty());
}

/// A `helm upgrade` changing a Deployment and its ConfigMaps: the Deployment's own change (queued at once) and the
/// ConfigMaps' changes (coalesced) are one run when the coalesced change is due, whichever comes first. Run at
/// once, the Deployment's change would write the first ConfigMap's content and the next ones would roll it again.
#[tokio::test(start_paused = true)]
async fn a_workloads_own_change_waits_for_its_coalesced_resource_change() {
    let window = Duration::from_secs(5);
    for own_change_first in [false, true] {
        let q = queue();
        let t0 = Instant::now();
        let start = tokio::time::Instant::now();
        if own_change_first {
            q.add("web", t0);
            q.add_coalesced("web", t0 + Duration::from_millis(1), window, window);
        } else {
            q.add_coalesced("web", t0, window, window);
            q.add("web", t0 + Duration::from_millis(1));
        }
        assert_eq!(q.next().await.map(|(k, t)| (k, t.at)), Some(("web", t0)), "own change first: {own_change_first}");
        assert_eq!(
            start.elapsed(),
            window,
            "run when the resource change is due (own change first: {own_change_first})"
        );
        q.done(&"web");
        tokio::time::sleep(window * 2).await;
        assert!(q.is_empty(), "one run for both (own change first: {own_change_first})");
    }
}

/// A workload in flight when a resource change comes: the change waits for quiet after the run, not at once.
#[tokio::test(start_paused = true)]
async fn a_coalesced_change_of_a_key_in_flight_waits_for_quiet() {
    let window = Duration::from_secs(5);
    let q = queue();
    q.add("web", Instant::now());
    let (k, _) = q.next().await.expect("web");
    q.add("web", Instant::now()); // its own change while in flight: would run again right after
    q.add_coalesced("web", Instant::now(), window, window);
    let start = tokio::time::Instant::now();
    q.done(&k);
    assert_eq!(q.next().await.map(|(k, _)| k), Some("web"));
    assert_eq!(start.elapsed(), window);
}

/// A timer (a pod-restart step's wait, a pause ending) does not hold the key: its own changes run it at once.
#[tokio::test(start_paused = true)]
async fn a_timer_does_not_hold_other_triggers() {
    let q = queue();
    let start = tokio::time::Instant::now();
    q.add_after("web", Instant::now(), Duration::from_secs(30));
    q.add("web", Instant::now());
    assert_eq!(q.next().await.map(|(k, _)| k), Some("web"));
    assert_eq!(start.elapsed(), Duration::ZERO);
}
