//! Workloads whose reload waits at a rollout gate (issue 17, `crate::rules::gates`): held after a failed rollout of the
//! same change, behind a lower wave, or outside their reload window. Nothing here is the source of truth — the
//! gates are decided from the index each time a workload is planned, so a restart decides the same — this only
//! remembers whom to plan again and when (a window opening, the workload waited for changing), what was already
//! announced (one Event per workload and reason, one per held change), and the `reloader_waiting_workloads` gauge.

use std::{
    collections::{HashMap, HashSet},
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use tracing::{info, warn};

use super::Context;
use crate::rules::gates::{self, Wait};
use crate::{
    index::{ConfigKey, PlannedReload},
    workload::WorkloadKey,
};

/// Longest a workload outside its window sleeps before the gate looks again.
const WINDOW_RECHECK: Duration = Duration::from_secs(3600);

/// Held changes remembered as announced, at most.
const ANNOUNCED_LIMIT: usize = 4096;

struct Entry {
    wait: Wait,
    /// When to plan it again by itself (a window opening).
    due: Option<Instant>,
}

#[derive(Default)]
struct State {
    entries: HashMap<WorkloadKey, Entry>,
    /// Held changes already announced (Event on the resource, alert): (resource, hold id).
    announced: HashSet<(ConfigKey, String)>,
}

/// The registry.
#[derive(Default)]
pub(super) struct Waiting {
    state: Mutex<State>,
}

impl Waiting {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Workloads to plan again now: windows due, and those waiting for `changed` (its rollout or record moved).
    pub(super) fn to_wake(&self, now: Instant, changed: Option<&WorkloadKey>) -> Vec<WorkloadKey> {
        let mut state = self.state();
        let mut out = Vec::new();
        for (key, entry) in &mut state.entries {
            let waits_for = match &entry.wait {
                Wait::Held { failed, .. } => Some(failed),
                Wait::Wave { behind, .. } => Some(&behind.0),
                Wait::Window { .. } | Wait::Paused { .. } => None,
            };
            if entry.due.is_some_and(|d| d <= now) || (changed.is_some() && waits_for == changed) {
                entry.due = None;
                out.push(key.clone());
            }
        }
        out
    }

    /// The workloads of `namespace` that wait.
    pub(super) fn in_namespace(&self, namespace: &str) -> Vec<WorkloadKey> {
        self.state().entries.keys().filter(|k| &*k.namespace == namespace).cloned().collect()
    }

    /// The workload is gone.
    pub(super) fn forget(&self, key: &WorkloadKey, gauge: &prometheus::IntGaugeVec) {
        if self.state().entries.remove(key).is_some() {
            self.report(gauge);
        }
    }

    /// Sets `reloader_waiting_workloads{reason}`.
    pub(super) fn report(&self, gauge: &prometheus::IntGaugeVec) {
        let state = self.state();
        for reason in ["held", "wave", "window", "paused"] {
            let n = state.entries.values().filter(|e| e.wait.label() == reason).count();
            gauge.with_label_values(&[reason]).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

/// Whether `key`'s reloads wait at a gate; when they do, says so once (log line, Event; for a newly held change
/// also an Event on the resource and an alert) and remembers when to look again.
pub(super) fn check(ctx: &Context, key: &WorkloadKey, reloads: &[PlannedReload], uid: Option<String>) -> Option<Wait> {
    let halt_default = ctx.settings.halt_on_failed_rollout;
    let wait = {
        let index = ctx.index();
        let rollout_gates = index.workload_gates(key)?;
        if rollout_gates.is_default() && !halt_default {
            None
        } else {
            let changes = index.gate_changes(key, reloads, ctx.settings.decisions, |w| ctx.budget.timed_out(w));
            gates::gate(&rollout_gates, halt_default, &changes, jiff::Timestamp::now())
        }
    };
    let mut state = ctx.waiting.state();
    let Some(wait) = wait else {
        if let Some(entry) = state.entries.remove(key) {
            info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, was = entry.wait.label(),
                  "{} '{}' in namespace '{}' no longer waits", key.kind, key.name, key.namespace);
            drop(state);
            ctx.waiting.report(&ctx.metrics.waiting);
        }
        return None;
    };
    let due = match &wait {
        Wait::Window { opens_at: Some(at), window } => {
            // Looked at again at the latest every hour (the gate decides anew each time), so no instant is
            // ever computed from a far-away time.
            let delay = Duration::try_from(at.duration_since(jiff::Timestamp::now())).unwrap_or_default();
            let due = Instant::now().checked_add(delay.min(WINDOW_RECHECK));
            if due.is_none() {
                warn!(namespace = %key.namespace, workload = %key.name, window = %window, opens_at = %at,
                      "cannot schedule the reload of {key} for when its window opens; it is planned again at its next change");
            }
            due
        }
        _ => None,
    };
    let new = state.entries.get(key).is_none_or(|e| e.wait != wait);
    if state.announced.len() >= ANNOUNCED_LIMIT {
        // Bounded: forgetting only means a long-held change may be announced once more.
        state.announced.clear();
    }
    if let Wait::Held { resource, hold_id, failed } = &wait
        && state.announced.insert((resource.clone(), hold_id.clone()))
    {
        let message = format!(
            "the rollout of the change of {resource} failed on {failed}: the workloads still waiting for it are not \
             rolled; it rolls when the resource changes again, or annotate the resource {}={hold_id}",
            crate::constants::annotation::RELEASE_HOLD
        );
        warn!(resource = %resource, failed = %failed, hold_id = %hold_id, "{message}");
        if let Some(events) = ctx.events() {
            events.change_halted(resource, message.clone());
        }
        if let Some(alerts) = ctx.alerts() {
            alerts.halted(&message);
        }
    }
    if new {
        info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, reason = wait.label(),
              "{} '{}' in namespace '{}' waits: {wait}", key.kind, key.name, key.namespace);
        if let Some(events) = ctx.events()
            && !matches!(wait, Wait::Wave { .. })
        {
            events.reload_waits(key, uid, &wait);
        }
    }
    state.entries.insert(key.clone(), Entry { wait: wait.clone(), due });
    drop(state);
    ctx.waiting.report(&ctx.metrics.waiting);
    Some(wait)
}

/// Every second: workloads waiting for a budget slot that is free, and those whose window opened, are queued
/// again; timed-out rollouts are expired. Ends with the queue.
pub(super) async fn tick(ctx: std::sync::Arc<Context>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let mut ticks: u32 = 0;
    while !ctx.queue.is_closed() {
        every.tick().await;
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(10) {
            // Every 10 s: unused namespace names go, and the sizes of the index's maps are reported (one pass over
            // the workloads).
            let sizes = {
                let mut index = ctx.index();
                index.forget_unused_namespaces();
                index.map_sizes()
            };
            for (map, size) in sizes {
                ctx.metrics.index_objects.with_label_values(&[map]).set(i64::try_from(size).unwrap_or(i64::MAX));
            }
        }
        let now = Instant::now();
        for key in ctx.budget.tick(now).into_iter().chain(ctx.waiting.to_wake(now, None)) {
            ctx.queue.add(key, now);
        }
        ctx.budget.report(&ctx.metrics.rollouts);
        ctx.waiting.report(&ctx.metrics.waiting);
    }
}
