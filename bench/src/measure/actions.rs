//! Expected vs observed reloads, update by update.
//!
//! Every content the bench writes has a unique hash, so each reload mark seen on a workload (a `STAKATER_*`
//! value or a `last-reloaded-from` hash) maps to exactly one update. A (workload, update) pair is *required*
//! when the workload depends on the updated resource at the time of the update (and the update was not made
//! obsolete while the controller was down); every required pair must be seen once.
//!
//! - **superseded**: a required pair never seen, but a later update of the same resource was seen on that
//!   workload — a level-triggered controller legitimately skips content that was replaced before it acted.
//! - **missed**: a required pair never seen and not superseded.
//! - **duplicate**: a pair seen a second time (e.g. the annotation rewritten with the same hash).
//! - **unexpected**: a mark that maps to no update of a resource the workload depends on, or to the content a
//!   resource was created with (a rollout nothing asked for).
//!
//! All times are offsets from the scenario's start.

use std::{
    collections::{BTreeSet, HashMap},
    time::Duration,
};

use serde::{Deserialize, Serialize};

/// One content write by the bench.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// Index of the resource.
    pub config: usize,
    /// Hash of the new content; `None` for metadata-only writes (S4), which must cause nothing.
    pub hash: Option<String>,
    /// When the write request was sent.
    pub sent: Duration,
    /// Commit order among updates of one resource: the `resourceVersion` the API server returned. Concurrent
    /// writers (S7) can be committed in another order than they were sent, so send times cannot order them.
    pub order: u64,
    /// When the API server acknowledged the write: the latency's start. `None` until then (or if it failed).
    pub written: Option<Duration>,
    /// Replaced by a later update of the same resource while the controller was down: it cannot be applied
    /// on its own, so it is not required (seeing it is not an error either).
    pub optional: bool,
}

/// A workload's dependency on a resource, possibly only for part of the run (S5 churn).
#[derive(Clone, Debug, PartialEq)]
pub struct Dependency {
    /// Index of the workload.
    pub workload: usize,
    /// Index of the resource.
    pub config: usize,
    /// Updates sent before this are not required (the workload was too new to be known).
    pub required_from: Option<Duration>,
    /// Updates sent after this are not required (the workload was about to be deleted).
    pub required_until: Option<Duration>,
}

/// One reload mark change seen on a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Index of the workload.
    pub workload: usize,
    /// The new hash.
    pub hash: String,
    /// When the bench's watch delivered it.
    pub seen: Duration,
    /// Id of the workload write (watch event) it came with: several marks in one write are one rollout.
    pub write: u64,
}

/// The outcome of matching observations against updates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ActionStats {
    /// Content updates sent (metadata-only writes included).
    pub updates: usize,
    /// Required (workload, update) pairs.
    pub expected: usize,
    /// Required pairs seen (once each).
    pub observed: usize,
    /// Required pairs skipped in favour of a later content that was applied.
    pub superseded: usize,
    /// Required pairs never applied.
    pub missed: usize,
    /// Pairs seen more than once (extra sightings).
    pub duplicates: usize,
    /// Marks nothing asked for.
    pub unexpected: usize,
    /// Marks carrying the content a resource was created with: a rollout although nothing changed.
    pub rolled_unchanged: usize,
    /// Optional pairs seen.
    pub optional_observed: usize,
    /// Distinct workload writes that changed a reload mark (rollouts).
    pub rollouts: usize,
}

impl ActionStats {
    /// Nothing lost or extra: no missed, duplicate, unexpected or unchanged rollouts. Superseded content is
    /// allowed (the workload still ends on the newest content).
    pub fn correct(&self) -> bool {
        self.missed == 0 && self.duplicates == 0 && self.unexpected == 0 && self.rolled_unchanged == 0
    }

    /// Every required pair seen exactly once, nothing extra.
    pub fn exact(&self) -> bool {
        self.observed == self.expected
            && self.missed == 0
            && self.duplicates == 0
            && self.unexpected == 0
            && self.rolled_unchanged == 0
    }
}

/// Matches `observations` against `updates`. `initial` maps the hash of each resource's creation content to
/// the resource. Returns the stats and the latency of every required pair seen (update acknowledged → mark
/// seen), ms.
pub fn analyze(
    updates: &[Update],
    initial: &HashMap<String, usize>,
    deps: &[Dependency],
    observations: &[Observation],
) -> (ActionStats, Vec<f64>) {
    let by_hash: HashMap<&str, usize> =
        updates.iter().enumerate().filter_map(|(i, u)| Some((u.hash.as_deref()?, i))).collect();
    // (workload, update) → required?
    let mut pairs: HashMap<(usize, usize), bool> = HashMap::new();
    for (ui, u) in updates.iter().enumerate() {
        if u.hash.is_none() {
            continue;
        }
        for d in deps.iter().filter(|d| d.config == u.config) {
            let in_window = d.required_from.is_none_or(|f| f <= u.sent) && d.required_until.is_none_or(|t| u.sent <= t);
            let required = in_window && !u.optional;
            let entry = pairs.entry((d.workload, ui)).or_insert(false);
            *entry |= required;
        }
    }
    let mut stats = ActionStats { updates: updates.len(), ..ActionStats::default() };
    stats.expected = pairs.values().filter(|r| **r).count();
    let mut ordered: Vec<&Observation> = observations.iter().collect();
    ordered.sort_by_key(|o| o.seen);
    let mut seen_pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut writes: BTreeSet<u64> = BTreeSet::new();
    let mut latencies = Vec::new();
    for o in ordered {
        writes.insert(o.write);
        let Some(&ui) = by_hash.get(o.hash.as_str()) else {
            if initial.contains_key(o.hash.as_str()) {
                stats.rolled_unchanged += 1;
            } else {
                stats.unexpected += 1;
            }
            continue;
        };
        let Some(&required) = pairs.get(&(o.workload, ui)) else {
            stats.unexpected += 1;
            continue;
        };
        if !seen_pairs.insert((o.workload, ui)) {
            stats.duplicates += 1;
        } else if required {
            stats.observed += 1;
            let u = &updates[ui];
            latencies.push(o.seen.saturating_sub(u.written.unwrap_or(u.sent)).as_secs_f64() * 1000.0);
        } else {
            stats.optional_observed += 1;
        }
    }
    for (&(w, ui), _) in pairs.iter().filter(|(p, required)| **required && !seen_pairs.contains(p)) {
        let u = &updates[ui];
        let later_seen = seen_pairs
            .iter()
            .any(|&(sw, sui)| sw == w && updates[sui].config == u.config && updates[sui].order > u.order);
        if later_seen {
            stats.superseded += 1;
        } else {
            stats.missed += 1;
        }
    }
    stats.rollouts = writes.len();
    (stats, latencies)
}

/// Marks updates made obsolete during controller downtime: for each resource, every update sent in one of
/// `downtimes` (start, end) except the last one of that window is optional.
pub fn mark_downtime_superseded(updates: &mut [Update], downtimes: &[(Duration, Duration)]) {
    for &(start, end) in downtimes {
        // Last committed update of each resource in the window.
        let mut last_in_window: HashMap<usize, usize> = HashMap::new();
        for (i, u) in updates.iter().enumerate() {
            if u.hash.is_some() && start <= u.sent && u.sent <= end {
                let last = last_in_window.entry(u.config).or_insert(i);
                if updates[*last].order < u.order {
                    *last = i;
                }
            }
        }
        for (i, u) in updates.iter_mut().enumerate() {
            let in_window = u.hash.is_some() && start <= u.sent && u.sent <= end;
            if in_window && last_in_window.get(&u.config) != Some(&i) {
                u.optional = true;
            }
        }
    }
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;
