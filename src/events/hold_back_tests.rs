//! Holding Events back while reloads are written: woken by the queue settling, never polling.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;

struct Activity {
    busy: AtomicBool,
    looks: AtomicUsize,
}

fn activity() -> Arc<Activity> {
    Arc::new(Activity { busy: AtomicBool::new(true), looks: AtomicUsize::new(0) })
}

fn busy_fn(a: &Arc<Activity>) -> impl Fn() -> bool + use<> {
    let a = a.clone();
    move || {
        a.looks.fetch_add(1, Ordering::SeqCst);
        a.busy.load(Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn a_held_back_event_goes_when_reload_work_settles_without_polling_meanwhile() {
    let a = activity();
    let settled = Arc::new(Notify::new());
    let start = Instant::now();
    let waiter = {
        let (busy, settled) = (busy_fn(&a), settled.clone());
        tokio::spawn(async move { hold_back(&busy, &settled, start + MAX_DEFER).await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiter.is_finished(), "still busy");
    assert_eq!(a.looks.load(Ordering::SeqCst), 1, "looked once, then waited for the signal (no polling)");
    a.busy.store(false, Ordering::SeqCst);
    settled.notify_waiters();
    assert_eq!(waiter.await.expect("hold_back"), Release::Settled);
    assert_eq!(start.elapsed(), Duration::from_millis(1500), "released by the signal, not the deadline");
}

#[tokio::test(start_paused = true)]
async fn a_held_back_event_goes_at_its_deadline_while_work_goes_on() {
    let a = activity();
    let settled = Arc::new(Notify::new());
    let start = Instant::now();
    // A wake-up while still busy (other work finished, new work arrived) waits on.
    let nudger = {
        let settled = settled.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            settled.notify_waiters();
        })
    };
    assert_eq!(hold_back(&busy_fn(&a), &settled, start + MAX_DEFER).await, Release::Deadline);
    nudger.await.expect("nudger");
    assert_eq!(start.elapsed(), MAX_DEFER);
    assert_eq!(a.looks.load(Ordering::SeqCst), 2, "looked at the start and when nudged");
}

#[tokio::test(start_paused = true)]
async fn nothing_busy_means_no_wait() {
    let a = activity();
    a.busy.store(false, Ordering::SeqCst);
    let start = Instant::now();
    assert_eq!(hold_back(&busy_fn(&a), &Notify::new(), start + MAX_DEFER).await, Release::Settled);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn events_due_shortly_after_one_released_by_its_deadline_go_with_it() {
    let a = activity();
    let busy = busy_fn(&a);
    let settled = Notify::new();
    let start = Instant::now();
    let mut deferral = Deferral::default();
    let mut released = Vec::new();
    // Queued every 20 ms through a burst of reloads that never settles.
    for queued_ms in [0, 20, 40, 250, 260, 300, 520] {
        let queued = start + Duration::from_millis(queued_ms);
        deferral.wait(&busy, &settled, queued).await;
        released.push(start.elapsed().as_millis());
    }
    // The first waits out MAX_DEFER; those due within DEFER_GROUP after it (until 2,250) go at once; 260 (due
    // 2,260) waits and starts the next group (until 2,510), which takes 300; 520 (due 2,520) waits again.
    assert_eq!(released, [2000, 2000, 2000, 2000, 2260, 2260, 2520]);
    a.busy.store(false, Ordering::SeqCst);
    deferral.wait(&busy, &settled, start + Duration::from_millis(900)).await;
    assert_eq!(start.elapsed().as_millis(), 2520, "settled: no wait");
    assert!(deferral.group_until.is_none(), "a settled release starts no group");
}
