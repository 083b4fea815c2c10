//! A deduplicating work queue with client-go semantics: a key waits in the queue at most once, is processed by
//! at most one worker at a time, and a key added while in flight is processed again afterwards. Failed keys
//! come back after an exponential backoff. Each entry remembers when it was first triggered, for latency.
//! The entry also fixes the trigger's wall-clock time once ([`Trigger`]): every attempt of one trigger writes
//! exactly that time (`observedAt`, Argo's `restartAt`), so a retry after a lost response writes what is already
//! there and rolls nothing (issue 27, finding 2).
//! Keys added as background work (the full reconcile after a (re)list) wait in a second lane that is served
//! only when the first is empty, so a change's reload does not queue behind a thousand first-sight records
//! (bench/results/HISTORY.md, M1); a background key triggered by a change moves to the first lane in O(1): its old
//! place in the background lane is left behind and skipped when reached.
//! Background work takes one worker at most, and a run of it that wrote only a record (a workload's first-sight
//! `applied-hashes`) holds the lane for [`RECORD_PACE`]: a start among 12,000 unrecorded workloads writes their
//! records at 20 a second instead of as fast as the API server answers, beside the reloads (issue 39).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::Notify;

/// When a key was first triggered: the monotonic instant (for latency and ordering) and the wall-clock time
/// that writes carry. Fixed when the entry is made and kept through retries — for the content the first write
/// carried: a retry that carries newer content takes a newer time ([`Trigger::mark_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// The monotonic time of the trigger.
    pub at: Instant,
    /// The trigger's wall-clock time.
    pub wall: jiff::Timestamp,
    /// What a write attempted for this trigger carried (a fingerprint of its reloads), once one was.
    pub carried: Option<u64>,
}

impl Trigger {
    /// The trigger that happened at `at` (at most a moment ago): its wall-clock time is read now, once.
    pub fn at(at: Instant) -> Self {
        let now = jiff::Timestamp::now();
        let ago = jiff::SignedDuration::try_from(at.elapsed()).unwrap_or_default();
        Self { at, wall: now.checked_sub(ago).unwrap_or(now), carried: None }
    }

    /// The time a write carrying `content` writes (the restart strategy's `restartedAt`, Argo's `restartAt`,
    /// `observedAt`): this trigger's, unless an attempt of it carried other content. That write may have landed
    /// with this time (its answer lost): the same time with newer content would change no template while the
    /// record said it was applied (issue 38, finding 6), so newer content takes a later time, `now` at the
    /// earliest a millisecond after.
    pub fn mark_for(&mut self, content: u64, now: jiff::Timestamp) -> jiff::Timestamp {
        if self.carried.is_some_and(|c| c != content) {
            let later = self.wall.checked_add(jiff::SignedDuration::from_millis(1)).unwrap_or(self.wall);
            self.wall = now.max(later);
        }
        self.carried = Some(content);
        self.wall
    }

    /// The earlier of two triggers, with the time and content of a write attempted for either.
    fn earliest(self, other: Self) -> Self {
        let (mut kept, dropped) = if other.at < self.at { (other, self) } else { (self, other) };
        if kept.carried.is_none() && dropped.carried.is_some() {
            (kept.wall, kept.carried) = (dropped.wall, dropped.carried);
        }
        kept
    }
}

struct State<K> {
    queue: VecDeque<K>,
    /// The background lane, served when `queue` is empty. May hold stale entries of promoted keys.
    background: VecDeque<K>,
    /// How many entries of `background` are stale (their key was promoted to `queue`).
    stale: usize,
    /// Keys waiting in a lane or to be re-queued after their in-flight run: first trigger time, and whether
    /// they are background work.
    waiting: HashMap<K, (Trigger, bool)>,
    in_flight: HashSet<K>,
    /// The background key being processed: while there is one, the background lane is not served.
    background_in_flight: Option<K>,
    /// The background lane is not served before this ([`WorkQueue::pace_background`]).
    background_paused_until: Option<tokio::time::Instant>,
    /// Keys whose delayed add is pending.
    delayed: HashMap<K, Delayed>,
    failures: HashMap<K, u32>,
    closed: bool,
}

/// A pending delayed add.
struct Delayed {
    /// First trigger.
    first: Trigger,
    /// A change of a resource waiting for quiet ([`WorkQueue::add_coalesced`]), not only a timer
    /// ([`WorkQueue::add_after`]): every other trigger of the key joins it instead of running the key before it is
    /// due, as that run would write the changes seen so far without those still to come.
    holds: bool,
    /// When it is due now (moves with each trigger, never past `cap`).
    due: tokio::time::Instant,
    /// The latest it may be due.
    cap: tokio::time::Instant,
}

impl<K: Clone + Eq + Hash> State<K> {
    /// The next live key of the background lane, dropping stale entries of promoted keys on the way; `None` while
    /// another background key is in flight or the lane is paced.
    fn pop_background(&mut self, now: tokio::time::Instant) -> Option<K> {
        if self.background_in_flight.is_some() || self.background_paused_until.is_some_and(|t| t > now) {
            return None;
        }
        while let Some(key) = self.background.pop_front() {
            if self.waiting.get(&key).is_some_and(|&(_, background)| background) && !self.in_flight.contains(&key) {
                if self.delayed.contains_key(&key) {
                    // A change is being coalesced for it: run now, the reconcile would write that change before
                    // the window ends (without the changes still to come); the delayed add runs it instead.
                    self.waiting.remove(&key);
                    continue;
                }
                self.background_in_flight = Some(key.clone());
                return Some(key);
            }
            self.stale = self.stale.saturating_sub(1);
        }
        None
    }

    /// True when the background lane holds a key that is not a stale entry.
    fn live_background(&self) -> bool {
        self.background.len() > self.stale
    }
}

/// How long a background run that wrote only a record holds the background lane: first-sight records go at
/// 20 a second at most (12,000 workloads in 10 minutes), so a start or failover in a big cluster does not
/// spend the API server's writes, and ours, on them while changes are reloaded. A restart before a workload's
/// record is written treats it as upstream does (its resources' content then is its baseline).
pub const RECORD_PACE: Duration = Duration::from_millis(50);

/// The longest a delayed add waits. Delays come from cluster data (a pause period of centuries); a key
/// looked at again after a day re-derives its state and waits again, and no `Instant` arithmetic overflows.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);

/// When a delay of `delay` (at most [`MAX_DELAY`]) from `now` ends.
fn deadline_after(now: tokio::time::Instant, delay: Duration) -> tokio::time::Instant {
    now + delay.min(MAX_DELAY)
}

/// The queue. Cheap to clone.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    /// Notified (all waiters) when the last change work finishes: [`Self::has_change_work`] turned false.
    settled: Arc<Notify>,
    base_backoff: Duration,
    max_backoff: Duration,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            notify: self.notify.clone(),
            settled: self.settled.clone(),
            base_backoff: self.base_backoff,
            max_backoff: self.max_backoff,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// A queue whose retries back off from `base_backoff`, doubling, up to `max_backoff`.
    pub fn new(base_backoff: Duration, max_backoff: Duration) -> Self {
        let state = State {
            queue: VecDeque::new(),
            background: VecDeque::new(),
            stale: 0,
            waiting: HashMap::new(),
            in_flight: HashSet::new(),
            background_in_flight: None,
            background_paused_until: None,
            delayed: HashMap::new(),
            failures: HashMap::new(),
            closed: false,
        };
        let (notify, settled) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        Self { state: Arc::new(Mutex::new(state)), notify, settled, base_backoff, max_backoff }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `key`, triggered at `at`. If it is already waiting, the earliest trigger time is kept; a background
    /// key moves to the first lane and takes this trigger.
    pub fn add(&self, key: K, at: Instant) {
        self.add_to_lane(key, Trigger::at(at), false);
    }

    /// Adds `key` again for the trigger it was taken off the queue with (its wall-clock time kept).
    pub fn add_again(&self, key: K, trigger: Trigger) {
        self.add_to_lane(key, trigger, false);
    }

    /// Adds `key` as background work: served after every other waiting key. No-op if it is already waiting.
    pub fn add_background(&self, key: K, at: Instant) {
        self.add_to_lane(key, Trigger::at(at), true);
    }

    fn add_to_lane(&self, key: K, at: Trigger, background: bool) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        if !background
            && let Some(d) = s.delayed.get_mut(&key)
            && d.holds
        {
            // A change of the workload itself (its status moving, a rollout it started) while a resource change
            // waits for quiet: run both when that is due. Run now, it would write the resource changes seen so far
            // and the next ones would roll it again (a `helm upgrade` changing a Deployment and its ConfigMaps).
            d.first = d.first.earliest(at);
            return;
        }
        if let Some((t, was_background)) = s.waiting.get_mut(&key) {
            if *was_background && !background {
                // A change promotes background work (a relist's reconcile): the write is now for the change, so its
                // latency (`reloader_action_latency_seconds`, the log's `latency_ms`) and its time start at the
                // change, not at the relist seconds before it.
                *t = at;
                *was_background = false;
                // Queued in the background lane unless in flight (then `finish` queues it, in the first lane now).
                if !s.in_flight.contains(&key) {
                    s.stale += 1;
                    s.queue.push_back(key);
                    drop(s);
                    self.notify.notify_one();
                }
            } else {
                *t = t.earliest(at);
            }
            return;
        }
        s.waiting.insert(key.clone(), (at, background));
        if !s.in_flight.contains(&key) {
            if background {
                s.background.push_back(key)
            } else {
                s.queue.push_back(key)
            }
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Whether a resource change is coalescing for `key` ([`WorkQueue::add_coalesced`]): a run of it now (one that
    /// started before the change came) is left to the run when that change is due.
    pub fn coalescing(&self, key: &K) -> bool {
        self.lock().delayed.get(key).is_some_and(|d| d.holds)
    }

    /// Adds `key` after exactly `delay` (a timer, e.g. a pause ending): delayed adds that arrive meanwhile join it;
    /// other triggers run the key as usual.
    pub fn add_after(&self, key: K, at: Instant, delay: Duration) {
        self.add_delayed(key, at, delay, delay, false);
    }

    /// Adds `key` once triggers for it have stopped for `quiet`, at most `cap` after the first (coalescing):
    /// `kubectl apply -f dir/` or a Helm upgrade changing several resources of one workload (writes milliseconds
    /// apart) becomes one run, a single change waits only `quiet`, and a resource that changes constantly
    /// cannot starve its workloads past `cap`. Until then the key's other triggers join it, and one already
    /// waiting in the first lane is taken out to wait with it.
    pub fn add_coalesced(&self, key: K, at: Instant, quiet: Duration, cap: Duration) {
        if cap.is_zero() {
            return self.add(key, at);
        }
        self.add_delayed(key, at, quiet, cap, true);
    }

    fn add_delayed(&self, key: K, at: Instant, quiet: Duration, cap: Duration, holds: bool) {
        let now = tokio::time::Instant::now();
        let mut at = Trigger::at(at);
        {
            let mut s = self.lock();
            if s.closed {
                return;
            }
            // One waiting as background work stays there: its delayed add promotes it when due (and the background
            // lane skips it meanwhile), so a change never queues behind background work.
            if let Some(&(waiting, false)) = s.waiting.get(&key) {
                if !holds {
                    return; // a timer: the key runs soon anyway
                }
                at = at.earliest(waiting);
                s.waiting.remove(&key);
                if !s.in_flight.contains(&key) {
                    s.queue.retain(|k| k != &key);
                }
            }
            if let Some(d) = s.delayed.get_mut(&key) {
                d.first = d.first.earliest(at);
                d.due = deadline_after(now, quiet).min(d.cap);
                d.holds |= holds;
                return;
            }
            let cap = deadline_after(now, cap);
            let due = deadline_after(now, quiet).min(cap);
            s.delayed.insert(key.clone(), Delayed { first: at, due, cap, holds });
        }
        let queue = self.clone();
        tokio::spawn(async move {
            loop {
                let due = queue.lock().delayed.get(&key).map(|d| d.due);
                match due {
                    Some(due) if due > tokio::time::Instant::now() => tokio::time::sleep_until(due).await,
                    _ => break,
                }
            }
            let first = queue.lock().delayed.remove(&key).map(|d| d.first);
            queue.add_again(key, first.unwrap_or(at));
        });
    }

    /// Waits for the next key; `None` once the queue is shut down and empty.
    pub async fn next(&self) -> Option<(K, Trigger)> {
        loop {
            let notified = self.notify.notified();
            let paced = {
                let mut s = self.lock();
                let now = tokio::time::Instant::now();
                if let Some(key) = s.queue.pop_front().or_else(|| s.pop_background(now)) {
                    let at = s.waiting.remove(&key).map_or_else(|| Trigger::at(Instant::now()), |(t, _)| t);
                    s.in_flight.insert(key.clone());
                    if !s.queue.is_empty() || (s.background_in_flight.is_none() && s.live_background()) {
                        self.notify.notify_one();
                    }
                    return Some((key, at));
                }
                if s.closed {
                    self.notify.notify_one();
                    return None;
                }
                // Background work held only by its pace: look again when the pace ends.
                s.background_paused_until.filter(|_| s.background_in_flight.is_none() && s.live_background())
            };
            match paced {
                Some(until) => tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(until) => {}
                },
                None => notified.await,
            }
        }
    }

    /// Holds the background lane for [`RECORD_PACE`] if `key` is the background key in flight: its run wrote
    /// only a record.
    pub fn pace_background(&self, key: &K) {
        let mut s = self.lock();
        if s.background_in_flight.as_ref() == Some(key) {
            s.background_paused_until = Some(tokio::time::Instant::now() + RECORD_PACE);
        }
    }

    /// Marks `key` processed successfully: its failure count resets; if re-added meanwhile, it is queued.
    pub fn done(&self, key: &K) {
        let mut s = self.lock();
        s.failures.remove(key);
        self.finish(s, key);
    }

    /// Marks `key` failed: it is re-added after its backoff. Returns the attempt number and the delay.
    /// `at_least`: the API server's `Retry-After`, when it sent one (429).
    pub fn retry(&self, key: &K, first_trigger: Trigger, at_least: Duration) -> (u32, Duration) {
        let mut s = self.lock();
        let attempts = s.failures.entry(key.clone()).or_insert(0);
        *attempts += 1;
        let attempt = *attempts;
        let backoff = self.base_backoff.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(self.max_backoff);
        let delay = backoff.max(at_least);
        self.finish(s, key);
        let queue = self.clone();
        let key = key.clone();
        let deadline = deadline_after(tokio::time::Instant::now(), delay);
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            queue.add_again(key, first_trigger);
        });
        (attempt, delay)
    }

    /// Marks `key` processed without retrying and forgets its failures (a permanent error).
    pub fn forget(&self, key: &K) {
        self.done(key);
    }

    fn finish(&self, mut s: std::sync::MutexGuard<'_, State<K>>, key: &K) {
        s.in_flight.remove(key);
        let background_freed = s.background_in_flight.as_ref() == Some(key);
        if background_freed {
            s.background_in_flight = None;
        }
        let requeued = s.waiting.get(key).map(|&(_, background)| background);
        match requeued {
            Some(true) => s.background.push_back(key.clone()),
            Some(false) => s.queue.push_back(key.clone()),
            None => {}
        }
        let settled = s.queue.is_empty() && s.in_flight.is_empty();
        let background_waits = background_freed && s.live_background();
        drop(s);
        if requeued.is_some() || background_waits {
            self.notify.notify_one();
        }
        if settled {
            self.settled.notify_waiters();
        }
    }

    /// Keys waiting (not in flight).
    pub fn len(&self) -> usize {
        let s = self.lock();
        (s.queue.len() + s.background.len()).saturating_sub(s.stale)
    }

    /// True while a change-triggered key waits or any key is being processed (background work that only
    /// waits does not count: it is served when nothing else is).
    pub fn has_change_work(&self) -> bool {
        let s = self.lock();
        !s.queue.is_empty() || !s.in_flight.is_empty()
    }

    /// Notified (all waiters) each time [`Self::has_change_work`] turns false.
    pub fn settled_signal(&self) -> Arc<Notify> {
        self.settled.clone()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting keys; workers drain what is queued, then `next` returns `None`.
    pub fn shut_down(&self) {
        self.lock().closed = true;
        self.settled.notify_waiters();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    /// True once [`Self::shut_down`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
