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

/// Issue 27, finding 0: a controller that exits while reloads keep it busy publishes the Events it held back,
/// at once, instead of dropping them with the runtime.
#[tokio::test]
async fn the_flush_on_exit_publishes_held_events_at_once() {
    let (service, mut handle) =
        tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let client = Client::new(service, "ns");
    let metrics = Arc::new(Metrics::new(false));
    // Always busy: without the flush the Event would wait out MAX_DEFER (and be lost when the runtime ends).
    let (sink, flush) = EventSink::spawn(client, metrics, || true, Arc::new(Notify::new()));
    let key =
        WorkloadKey { kind: crate::workload::WorkloadKind::Deployment, namespace: "ns".into(), name: "web".into() };
    sink.reloaded(&key, None, ("cfg", "CONFIGMAP"), None, None);
    let server = tokio::spawn(async move {
        let (request, respond) = handle.next_request().await.expect("the Event's POST");
        let created = serde_json::json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "ns"}, "eventTime": "2026-12-04T10:00:00.000000Z"});
        respond
            .send_response(http::Response::new(kube::client::Body::from(serde_json::to_vec(&created).expect("json"))));
        (request.method().clone(), request.uri().path().to_owned())
    });
    let started = std::time::Instant::now();
    flush.within(Duration::from_secs(5)).await;
    assert!(started.elapsed() < MAX_DEFER, "published without being held back: {:?}", started.elapsed());
    let (method, path) = tokio::time::timeout(Duration::from_secs(1), server).await.expect("answered").expect("server");
    assert_eq!((method.as_str(), path.as_str()), ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events"));
}
