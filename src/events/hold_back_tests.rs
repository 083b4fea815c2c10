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
    waiter.await.expect("hold_back");
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
    hold_back(&busy_fn(&a), &settled, start + MAX_DEFER).await;
    nudger.await.expect("nudger");
    assert_eq!(start.elapsed(), MAX_DEFER);
    assert_eq!(a.looks.load(Ordering::SeqCst), 2, "looked at the start and when nudged");
}

#[tokio::test(start_paused = true)]
async fn nothing_busy_means_no_wait() {
    let a = activity();
    a.busy.store(false, Ordering::SeqCst);
    let start = Instant::now();
    hold_back(&busy_fn(&a), &Notify::new(), start + MAX_DEFER).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
}
