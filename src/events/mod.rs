//! Kubernetes Events (events.k8s.io/v1, or core v1 where only that is allowed — upstream v1's RBAC grants
//! `create`/`patch` on core `events` only) on workloads: `Reloaded` for every reload, `ReloadFail` when a write
//! is rejected (upstream v1's reasons and messages), `InvalidAnnotation` for a bad annotation value. Events go
//! through a bounded queue to one publisher task, so they never delay reloads; overflow is counted, not waited
//! for. While reloads are being written the publisher holds back (up to [`MAX_DEFER`]): an Event costs the API
//! server as much as a reload's PATCH, and in a fan-out of 50 workloads writing the 50 Events between the
//! PATCHes doubled the time to the last reload (bench/results/HISTORY.md, S2); Events whose time is up within
//! 250 ms of each other go together. Messages name resources and annotation values, never Secret data.
//! On exit, [`EventsFlush`] publishes what is still held, without holding it back further, within a deadline:
//! a controller stopping right after a reload (SIGTERM, lost leadership) used to drop its `Reloaded` Event.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use tokio::{
    sync::{Notify, mpsc},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

pub use publisher::{EventNote, EventType, EventsApi};

use crate::{metrics::Metrics, workload::WorkloadKey};

mod publisher;

/// Name this controller reports events as.
pub const REPORTER: &str = "reloader";
/// Pending events beyond this are dropped (and counted). Through a sustained burst the queue holds what arrives
/// while the first Event is held back (2 s) plus the backlog of a publisher writing one Event at a time: at M2N's
/// 200 reloads a second, 1,024 dropped 683 of 3,980 `Reloaded` Events (counted in the API server's audit log). An
/// Event is about half a KiB, so a full queue is 2 MiB, held only through such a burst.
const QUEUE: usize = 4096;
/// Longest an event waits for reload work to finish before it is published anyway.
pub const MAX_DEFER: Duration = Duration::from_secs(2);
/// Events whose [`MAX_DEFER`] ends this soon after one that waited it out go with that one: through a long
/// burst of reloads (an Event queued every 20 ms) the publisher then wakes on a timer 4 times a second instead of
/// once per Event.
const DEFER_GROUP: Duration = Duration::from_millis(250);

/// A queued event, with when it was queued.
type Pending = (EventNote, Instant);

/// Sends events to the publisher task.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Pending>,
    metrics: Arc<Metrics>,
}

impl EventSink {
    /// Starts the publisher task. It holds each event back while `busy()` (reloads waiting or being written),
    /// for at most [`MAX_DEFER`] after the event was queued (Events due within 250 ms of each other go together);
    /// `settled` is notified (`notify_waiters`) when `busy()` turns false, so a held-back event is not polled for
    /// (it was every 20 ms: a wake-up of the controller's one thread 50 times a second all through a long
    /// fan-out). The returned [`EventsFlush`] publishes what is left when the controller exits.
    pub fn spawn(
        client: Client,
        metrics: Arc<Metrics>,
        busy: impl Fn() -> bool + Send + Sync + 'static,
        settled: Arc<Notify>,
    ) -> (Self, EventsFlush) {
        let (tx, mut rx) = mpsc::channel::<Pending>(QUEUE);
        let mut publisher = publisher::Publisher::new(client);
        let m = metrics.clone();
        let drain = CancellationToken::new();
        let draining = drain.clone();
        let task = tokio::spawn(async move {
            let mut api = EventsApi::V1;
            let mut deferral = Deferral::default();
            loop {
                let next = tokio::select! {
                    biased;
                    next = rx.recv() => next,
                    // Takes no more Events; those queued are still received (then `recv` ends).
                    () = draining.cancelled(), if !rx.is_closed() => { rx.close(); continue }
                };
                let Some((event, queued)) = next else { break };
                tokio::select! {
                    () = deferral.wait(&busy, &settled, queued) => {}
                    () = draining.cancelled() => {}
                }
                let mut result = publisher.publish(&event, api).await;
                if api == EventsApi::V1 && matches!(&result, Err(kube::Error::Api(s)) if s.code == 403) {
                    // Switch for good only when core Events work where events.k8s.io ones do not (upstream's
                    // RBAC); a 403 in one namespace the controller may not write to changes nothing.
                    let core = publisher.publish(&event, EventsApi::Core).await;
                    if core.is_ok() {
                        tracing::warn!(
                            "creating events.k8s.io Events is forbidden: using core v1 Events (what upstream's RBAC grants)"
                        );
                        api = EventsApi::Core;
                        result = core;
                    }
                }
                if let Err(e) = result {
                    m.errors.with_label_values(&["event_publish"]).inc();
                    tracing::debug!("publishing event {} failed: {e}", event.reason);
                }
            }
        });
        (Self { tx, metrics }, EventsFlush { drain, task })
    }

    fn send(
        &self,
        key: &WorkloadKey,
        uid: Option<String>,
        type_: EventType,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) {
        let reference = ObjectReference {
            api_version: Some(key.kind.facts().api_version.to_owned()),
            kind: Some(key.kind.to_string()),
            name: Some(key.name.clone()),
            namespace: Some(key.namespace.to_string()),
            uid,
            ..ObjectReference::default()
        };
        self.send_to(reference, type_, reason, action, note);
    }

    fn send_to(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) {
        let event = EventNote { regarding, type_, reason, action, note };
        if self.tx.try_send((event, Instant::now())).is_err() {
            self.metrics.errors.with_label_values(&["event_dropped"]).inc();
        }
    }

    /// upstream v1: `Reloaded` with `Changes detected in '<res>' of type '<TYPE>' in namespace '<ns>', Updated
    /// '<workload>' of type '<Kind>' in namespace '<ns>'`.
    /// Ours: ` (changed keys: a, b)` follows when the keys are known (names only).
    /// `ran`: how, when not upstream's way (`restart`, `evict-pods`, `delete-pods`, a CronJob's `patch`), said at
    /// the end of upstream's note.
    pub fn reloaded(
        &self,
        key: &WorkloadKey,
        uid: Option<String>,
        (resource, resource_type): (&str, &str),
        changed: Option<&crate::rules::keyprints::ChangedKeys>,
        ran: Option<&str>,
    ) {
        let mut note = format!(
            "Changes detected in '{resource}' of type '{resource_type}' in namespace '{ns}', Updated '{w}' of type '{k}' in namespace '{ns}'",
            ns = key.namespace,
            w = key.name,
            k = key.kind
        );
        if let Some(keys) = changed.filter(|c| !c.is_empty()) {
            note.push_str(&format!(" (changed keys: {keys})"));
        }
        if let Some(ran) = ran {
            note.push_str(&format!(" (rollout strategy: {ran})"));
        }
        self.send(key, uid, EventType::Normal, "Reloaded", "Reload", note);
    }

    /// upstream v1: `ReloadFail` with `Update for '<workload>' of type '<Kind>' in namespace '<ns>' failed with
    /// error <err>`.
    pub fn reload_failed(&self, key: &WorkloadKey, uid: Option<String>, error: &str) {
        let note = format!(
            "Update for '{}' of type '{}' in namespace '{}' failed with error {error}",
            key.name, key.kind, key.namespace
        );
        self.send(key, uid, EventType::Warning, "ReloadFail", "Reload", truncate(note));
    }

    /// Ours (issue 17): a reload of the workload waits — `Warning` `RolloutHalted` when the change failed to roll
    /// out elsewhere (the health gate), `Normal` `ReloadDeferred` outside its reload window or behind a wave.
    pub fn reload_waits(&self, key: &WorkloadKey, uid: Option<String>, wait: &crate::rules::gates::Wait) {
        let (type_, reason) = match wait {
            crate::rules::gates::Wait::Held { .. } => (EventType::Warning, "RolloutHalted"),
            _ => (EventType::Normal, "ReloadDeferred"),
        };
        self.send(key, uid, type_, reason, "Hold", truncate(wait.to_string()));
    }

    /// Ours (issue 17): `Warning` `RolloutHalted` on the resource whose change failed to roll out.
    pub fn change_halted(&self, config: &crate::index::ConfigKey, note: String) {
        let reference = ObjectReference {
            api_version: Some(config.kind.api_version().to_owned()),
            kind: Some(config.kind.to_string()),
            name: Some(config.name.clone()),
            namespace: Some(config.namespace.to_string()),
            ..ObjectReference::default()
        };
        self.send_to(reference, EventType::Warning, "RolloutHalted", "Hold", truncate(note));
    }

    /// Ours (issue 38): `Warning` on a Job deleted for a reload whose new Job is not created — `RecreateRefused`
    /// while a ResourceQuota refuses it, `RecreateAbandoned` once its owed recreation is given up. The Job is
    /// gone, so the Event names it without a UID.
    pub fn job_not_recreated(&self, key: &WorkloadKey, reason: &'static str, note: String) {
        self.send(key, None, EventType::Warning, reason, "Recreate", truncate(note));
    }

    /// A bad annotation value (or another configuration problem) on the workload.
    pub fn invalid_annotation(&self, key: &WorkloadKey, uid: Option<String>, message: &str) {
        self.send(key, uid, EventType::Warning, "InvalidAnnotation", "Validate", truncate(message.to_owned()));
    }

    /// A bad annotation value on a namespace (its `reload-window`); cluster-scoped, so the Event is written in
    /// `default`, as Kubernetes records Events about namespaces and nodes.
    pub fn invalid_namespace_annotation(&self, namespace: &str, message: &str) {
        let reference = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Namespace".to_owned()),
            name: Some(namespace.to_owned()),
            ..ObjectReference::default()
        };
        self.send_to(reference, EventType::Warning, "InvalidAnnotation", "Validate", truncate(message.to_owned()));
    }
}

/// Publishes the Events still queued when the controller exits.
pub struct EventsFlush {
    drain: CancellationToken,
    task: JoinHandle<()>,
}

impl EventsFlush {
    /// Publishes every queued Event at once (no holding back), waiting at most `within`; what is left after
    /// that is dropped, with a warning.
    pub async fn within(self, within: Duration) {
        self.drain.cancel();
        if tokio::time::timeout(within, self.task).await.is_err() {
            tracing::warn!("some Events were not published within {within:?} of shutting down");
        }
    }
}

/// How long each Event is held back, in order of queueing.
#[derive(Debug, Default)]
struct Deferral {
    /// Set when an Event was released by its deadline (work still going on): Events due until then go at once.
    group_until: Option<Instant>,
}

impl Deferral {
    /// Holds back the Event queued at `queued` (see [`hold_back`]), unless its deadline falls within the group of
    /// the last Event released by its deadline.
    async fn wait(&mut self, busy: &impl Fn() -> bool, settled: &Notify, queued: Instant) {
        let deadline = queued + MAX_DEFER;
        if self.group_until.is_some_and(|until| deadline <= until) {
            return;
        }
        self.group_until = match hold_back(busy, settled, deadline).await {
            Release::Deadline => Some(Instant::now() + DEFER_GROUP),
            Release::Settled => None,
        };
    }
}

/// Why an Event stopped being held back.
#[derive(Debug, PartialEq, Eq)]
enum Release {
    /// Nothing was busy (any more).
    Settled,
    /// Its deadline came while reload work went on.
    Deadline,
}

/// Waits while `busy()`, until `settled` is notified with nothing busy or until `deadline`.
async fn hold_back(busy: &impl Fn() -> bool, settled: &Notify, deadline: Instant) -> Release {
    loop {
        // Registered before looking, so a notification between the look and the wait is not lost.
        let notified = settled.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !busy() {
            return Release::Settled;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(deadline) => return Release::Deadline,
        }
    }
}

/// Event notes are limited to 1 kB.
fn truncate(mut note: String) -> String {
    if note.len() > 1000 {
        let mut end = 1000;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

#[cfg(test)]
#[path = "hold_back_tests.rs"]
mod hold_back_tests;
