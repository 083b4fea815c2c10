//! The restart budget (`--max-concurrent-rollouts`, issue 17): at most N workloads are in the middle of a rollout
//! this controller started. A rollout is in flight from the template write until the workload's status says the
//! generation that write produced is complete ([`RolloutState`] at a `metadata.generation` at least the one the
//! PATCH answered with), or until `--rollout-timeout`; a write that changed no template (the generation did not
//! move: a retry after a lost response, a template already so) frees its slot at once. Workloads over the budget
//! wait, level-triggered as ever: when a slot frees, the oldest waiting one is queued again and plans anew (a
//! workload whose content changed again while waiting rolls once, with the latest content). CronJobs and Jobs are
//! not counted (a run is new pods, not a rollout). StatefulSets, DaemonSets, Argo Rollouts and DeploymentConfigs
//! are, by their own status fields. A workload whose pods `evict-pods`/`delete-pods` restart holds its slot from
//! the write until its last pod was restarted ([`RolloutBudget::finished`]).
//!
//! The cluster is the source of truth here too: a new leader (or a restarted controller) counts the rollouts its
//! workloads' status shows in progress ([`RolloutBudget::adopt`]), rather than starting from an empty budget and
//! admitting N more on top of them.
//!
//! Rollouts are tracked whatever the limit (a map entry per rolling workload): one still in progress after
//! `--rollout-timeout` counts as failed for the health gate (`crate::rules::gates`) until it completes or is written
//! again — StatefulSets and DaemonSets have no deadline condition of their own. A failed rollout (a Deployment's
//! `ProgressDeadlineExceeded`) frees its slot.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use tracing::warn;

use crate::workload::{RolloutState, WorkloadKey};

#[derive(Debug)]
struct InFlight {
    since: Instant,
    /// The generation whose rollout is awaited: the one the write produced (`None` until the write answered).
    generation: Option<i64>,
}

#[derive(Debug, Default)]
struct State {
    in_flight: HashMap<WorkloadKey, InFlight>,
    waiting: VecDeque<WorkloadKey>,
    /// Rollouts past `--rollout-timeout`: failed, until complete or written again.
    timed_out: HashSet<WorkloadKey>,
}

/// Whether a workload may start its rollout now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Yes (a slot was taken, or it holds one already, or there is no budget).
    Go,
    /// No: it waits in line; it is queued again when a slot frees ([`RolloutBudget::observe`],
    /// [`RolloutBudget::tick`]).
    Wait,
}

/// The budget. With a limit of 0 every call admits; rollouts are still tracked (for timeouts).
#[derive(Debug)]
pub struct RolloutBudget {
    limit: usize,
    timeout: Duration,
    state: Mutex<State>,
}

impl RolloutBudget {
    /// A budget of `limit` concurrent rollouts (0: unlimited), each counted for at most `timeout`.
    pub fn new(limit: usize, timeout: Duration) -> Self {
        Self { limit, timeout, state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Asks for a slot for `key`'s rollout, before its template is written (or its pods restarted). The caller
    /// asks only for a write that starts one: not for a CronJob's, nor for an `OnDelete` StatefulSet's template.
    pub fn admit(&self, key: &WorkloadKey, now: Instant) -> Admission {
        let mut state = self.state();
        if self.limit > 0 && state.in_flight.len() >= self.limit {
            // A full budget may have slots past their timeout; otherwise [`Self::tick`] expires them each second
            // (scanning every rollout in flight on every write made a fan-out to n workloads cost n²).
            self.expire(&mut state, now);
        }
        state.timed_out.remove(key);
        if let Some(flight) = state.in_flight.get_mut(key) {
            // Written again while rolling (a newer content): it keeps its slot, counted from now, until the new
            // write's generation is complete (the previous one completing does not free it).
            *flight = InFlight { since: now, generation: None };
            return Admission::Go;
        }
        if self.limit == 0 || state.in_flight.len() < self.limit {
            state.waiting.retain(|k| k != key);
            state.in_flight.insert(key.clone(), InFlight { since: now, generation: None });
            return Admission::Go;
        }
        if !state.waiting.contains(key) {
            state.waiting.push_back(key.clone());
        }
        Admission::Wait
    }

    /// Frees the slots of rollouts past `--rollout-timeout`; they count as failed.
    fn expire(&self, state: &mut State, now: Instant) {
        let timeout = self.timeout;
        let mut expired = Vec::new();
        state.in_flight.retain(|k, f| {
            let live = now.duration_since(f.since) < timeout;
            if !live {
                warn!(namespace = %k.namespace, workload = %k.name, kind = %k.kind, ?timeout,
                      "rollout of {k} not complete after --rollout-timeout: counted as failed{}",
                      if self.limit > 0 { ", its slot in --max-concurrent-rollouts is freed" } else { "" });
                expired.push(k.clone());
            }
            live
        });
        state.timed_out.extend(expired);
    }

    /// Whether `key`'s rollout passed `--rollout-timeout` (and has not completed since).
    pub fn timed_out(&self, key: &WorkloadKey) -> bool {
        self.state().timed_out.contains(key)
    }

    /// Called every second: frees timed-out slots and returns as many waiting workloads as there are free slots
    /// (one woken by [`Self::observe`] that found nothing left to do must not leave the others waiting).
    pub fn tick(&self, now: Instant) -> Vec<WorkloadKey> {
        let mut state = self.state();
        self.expire(&mut state, now);
        if self.limit == 0 {
            return Vec::new();
        }
        let free = self.limit.saturating_sub(state.in_flight.len()).min(state.waiting.len());
        state.waiting.drain(..free).collect()
    }

    /// A rollout that is no template write ended: `evict-pods`/`delete-pods` restarted the last pod. Its slot
    /// was held from the write of the boundary (no generation awaited). Returns a workload to wake.
    pub fn finished(&self, key: &WorkloadKey) -> Option<WorkloadKey> {
        self.write_failed(key)
    }

    /// The write that took the slot failed: the slot is free again. Returns a workload to wake.
    pub fn write_failed(&self, key: &WorkloadKey) -> Option<WorkloadKey> {
        let mut state = self.state();
        state.in_flight.remove(key)?;
        state.waiting.pop_front()
    }

    /// The write that took the slot succeeded; `generation` is the workload's generation after it (when the
    /// response said; else the next one is awaited) and `indexed` its status as last seen (state, generation).
    /// Returns a workload to wake when the slot is free already: the write changed no template and nothing
    /// rolls, or the rollout it started was seen complete before the write's answer.
    pub fn written(
        &self,
        key: &WorkloadKey,
        generation: Option<i64>,
        indexed: Option<(RolloutState, i64)>,
    ) -> Option<WorkloadKey> {
        let mut state = self.state();
        let flight = state.in_flight.get_mut(key)?;
        let awaited = generation.or(indexed.map(|(_, g)| g.saturating_add(1)))?;
        flight.generation = Some(awaited);
        let done = indexed.is_some_and(|(rollout, seen)| rollout == RolloutState::Complete && seen >= awaited);
        if !done {
            return None;
        }
        state.in_flight.remove(key);
        if self.limit == 0 { None } else { state.waiting.pop_front() }
    }

    /// A workload's status, as the watch delivers it: its rollout state at `generation`. Returns the workload to
    /// wake when its rollout completed.
    pub fn observe(&self, key: &WorkloadKey, rollout: RolloutState, generation: i64) -> Option<WorkloadKey> {
        let mut state = self.state();
        if rollout == RolloutState::Complete {
            state.timed_out.remove(key);
        }
        let flight = state.in_flight.get(key)?;
        let ended = match rollout {
            RolloutState::Complete => flight.generation.is_some_and(|awaited| generation >= awaited),
            // The kind's controller gave up: the slot is free; the gates see the failure in the status.
            RolloutState::Failed => true,
            RolloutState::InProgress | RolloutState::Untracked => false,
        };
        if !ended {
            return None;
        }
        state.in_flight.remove(key);
        if self.limit == 0 { None } else { state.waiting.pop_front() }
    }

    /// Counts rollouts the cluster shows in progress (workload, generation) that the budget does not hold: on
    /// becoming leader, or at start, the rollouts an earlier leader started are still running.
    pub fn adopt(&self, rolling: Vec<(WorkloadKey, i64)>, now: Instant) {
        let mut state = self.state();
        for (key, generation) in rolling {
            state.in_flight.entry(key).or_insert(InFlight { since: now, generation: Some(generation) });
        }
    }

    /// The workload is gone: its slot and its place in line are freed. Returns a workload to wake.
    pub fn forget(&self, key: &WorkloadKey) -> Option<WorkloadKey> {
        let mut state = self.state();
        state.waiting.retain(|k| k != key);
        state.timed_out.remove(key);
        state.in_flight.remove(key)?;
        state.waiting.pop_front()
    }

    /// (rollouts in flight, workloads waiting), for the gauges.
    pub fn sizes(&self) -> (usize, usize) {
        let state = self.state();
        (state.in_flight.len(), state.waiting.len())
    }

    /// Sets `reloader_rollouts{state}`.
    pub fn report(&self, gauges: &prometheus::IntGaugeVec) {
        if self.limit == 0 {
            return;
        }
        let (in_flight, waiting) = self.sizes();
        gauges.with_label_values(&["in_flight"]).set(i64::try_from(in_flight).unwrap_or(i64::MAX));
        gauges.with_label_values(&["waiting"]).set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadKind;

    fn w(name: &str) -> WorkloadKey {
        WorkloadKey { kind: WorkloadKind::Deployment, namespace: "ns".into(), name: name.into() }
    }

    #[test]
    fn at_most_the_limit_roll_and_a_completed_rollout_wakes_the_oldest_waiting() {
        let budget = RolloutBudget::new(2, Duration::from_secs(600));
        let now = Instant::now();
        assert_eq!(budget.admit(&w("a"), now), Admission::Go);
        assert_eq!(budget.admit(&w("b"), now), Admission::Go);
        assert_eq!(budget.admit(&w("c"), now), Admission::Wait);
        assert_eq!(budget.admit(&w("d"), now), Admission::Wait);
        assert_eq!(budget.written(&w("a"), Some(5), Some((RolloutState::Complete, 4))), None);
        assert_eq!(budget.written(&w("b"), Some(3), Some((RolloutState::Complete, 2))), None);
        assert_eq!(budget.observe(&w("b"), RolloutState::InProgress, 3), None);
        assert_eq!(budget.admit(&w("b"), now), Admission::Go, "b holds its slot, written again");
        assert_eq!(budget.written(&w("b"), Some(4), Some((RolloutState::InProgress, 3))), None);
        assert_eq!(
            budget.observe(&w("b"), RolloutState::Complete, 3),
            None,
            "the first rollout's end is not the second's"
        );
        assert_eq!(budget.sizes(), (2, 2));
        // The status from before the write (complete at the old generation) does not free the slot; complete at
        // the written generation does.
        assert_eq!(budget.observe(&w("a"), RolloutState::Complete, 4), None);
        assert_eq!(budget.observe(&w("a"), RolloutState::InProgress, 5), None);
        assert_eq!(budget.observe(&w("a"), RolloutState::Complete, 5), Some(w("c")));
        assert_eq!(budget.admit(&w("c"), now), Admission::Go);
        assert_eq!(budget.sizes(), (2, 1));
        assert_eq!(budget.forget(&w("b")), Some(w("d")));
        assert_eq!(budget.write_failed(&w("c")), None, "nobody waits any more");
    }

    /// Issue 27: a write that changed no template (a retry after a lost response: the first attempt rolled) has
    /// the generation the status shows complete; its slot was held until --rollout-timeout and then counted as a
    /// failed rollout.
    #[test]
    fn a_write_that_changed_no_template_frees_its_slot_at_once() {
        let budget = RolloutBudget::new(1, Duration::from_secs(600));
        let now = Instant::now();
        assert_eq!(budget.admit(&w("a"), now), Admission::Go);
        assert_eq!(budget.admit(&w("b"), now), Admission::Wait);
        assert_eq!(budget.written(&w("a"), Some(7), Some((RolloutState::Complete, 7))), Some(w("b")));
        assert_eq!(budget.sizes(), (0, 0));
        assert!(!budget.timed_out(&w("a")));
        // A rollout seen complete before the write's answer arrived ends there too; one still rolling does not.
        assert_eq!(budget.admit(&w("b"), now), Admission::Go);
        assert_eq!(budget.written(&w("b"), Some(2), Some((RolloutState::Complete, 2))), None);
        assert_eq!(budget.sizes(), (0, 0));
        assert_eq!(budget.admit(&w("c"), now), Admission::Go);
        assert_eq!(budget.written(&w("c"), Some(2), Some((RolloutState::InProgress, 2))), None);
        assert_eq!(budget.sizes(), (1, 0), "the same generation still rolling holds the slot");
        // Without the write's generation, the one after the indexed one is awaited.
        assert_eq!(budget.forget(&w("c")), None);
        assert_eq!(budget.admit(&w("d"), now), Admission::Go);
        assert_eq!(budget.written(&w("d"), None, Some((RolloutState::Complete, 4))), None);
        assert_eq!(budget.observe(&w("d"), RolloutState::Complete, 4), None);
        assert_eq!(budget.observe(&w("d"), RolloutState::Complete, 5), None);
        assert_eq!(budget.sizes(), (0, 0));
    }

    /// Issue 27: after a failover the new leader's budget started empty and admitted N more rollouts on top of
    /// the N still running.
    #[test]
    fn rollouts_in_progress_at_takeover_count() {
        let budget = RolloutBudget::new(1, Duration::from_secs(600));
        let now = Instant::now();
        budget.adopt(vec![(w("a"), 3)], now);
        assert_eq!(budget.admit(&w("b"), now), Admission::Wait, "a's rollout holds the only slot");
        budget.adopt(vec![(w("a"), 9)], now);
        assert_eq!(budget.observe(&w("a"), RolloutState::Complete, 3), Some(w("b")), "adopting twice changes nothing");
    }

    #[test]
    fn no_limit_always_goes_and_a_stuck_rollout_times_out() {
        let unlimited = RolloutBudget::new(0, Duration::from_secs(1));
        let now = Instant::now();
        for name in ["a", "b", "c"] {
            assert_eq!(unlimited.admit(&w(name), now), Admission::Go);
        }
        assert_eq!(unlimited.sizes(), (3, 0), "tracked without a limit, for timeouts");
        let budget = RolloutBudget::new(1, Duration::from_secs(60));
        assert_eq!(budget.admit(&w("a"), now), Admission::Go);
        assert_eq!(budget.admit(&w("b"), now), Admission::Wait);
        assert_eq!(budget.tick(now), vec![], "no free slot yet");
        assert_eq!(budget.tick(now + Duration::from_secs(61)), vec![w("b")], "a timed out: b is woken");
        assert!(budget.timed_out(&w("a")), "a timed-out rollout counts as failed");
        assert_eq!(budget.admit(&w("b"), now + Duration::from_secs(61)), Admission::Go);
        assert_eq!(budget.observe(&w("a"), RolloutState::Complete, 1), None);
        assert!(!budget.timed_out(&w("a")), "until it completes");
    }

    #[test]
    fn a_failed_rollout_frees_its_slot() {
        let budget = RolloutBudget::new(1, Duration::from_secs(600));
        let now = Instant::now();
        assert_eq!(budget.admit(&w("a"), now), Admission::Go);
        assert_eq!(budget.admit(&w("b"), now), Admission::Wait);
        assert_eq!(budget.observe(&w("a"), RolloutState::Failed, 1), Some(w("b")), "ProgressDeadlineExceeded");
        assert_eq!(budget.sizes(), (0, 0));
    }
}
