//! Missed, duplicate and spurious rollouts from the template writes the runner saw (RELIABILITY.md, "How the
//! figures are computed").
//!
//! Every content the runner writes to a resource has a sequence number (0 = creation) and a unique hash, so each
//! reload mark on a template names the exact content it was rolled for. Per workload (which uses exactly one
//! resource), the writes are taken in the order the watch delivered them, with `best` = the newest content
//! rolled so far (the creation at first), "newest" in commit order (the `resourceVersion` of the update):
//!
//! - a write is **progressive** when it changes a reload mark to a known content of the workload's resource
//!   newer than `best` (it then becomes `best`). Several updates folded into one write (coalescing, or a
//!   controller that was down) are fine: the write is progressive once.
//! - otherwise it is a **duplicate**: *same-hash* (the template changed but no reload mark did, e.g. only
//!   `observedAt`), *stale* (a mark set to content not newer than `best`: a repeat or a step back), or
//!   *unknown* (a hash of no content the runner wrote for that resource).
//! - writes after the moment every workload carried its final hash (convergence) are **spurious** instead.
//! - a workload is **missed** when, at the end, its template does not carry the hash of its resource's final
//!   content although that content was changed (for a workload created mid-run: changed after its creation).
//!
//! Progressive writes strictly increase `best`, so a workload never has more of them than its resource had
//! updates: "more rollouts than distinct content changes" is always counted as duplicates.

use std::{collections::BTreeMap, time::Duration};

use serde::{Deserialize, Serialize};

use super::observe::TemplateWrite;

/// The contents one resource went through.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceContents {
    /// Hash of each content by sequence (0 = creation), including updates whose request failed (their content
    /// may have been committed anyway).
    pub hashes: Vec<String>,
    /// Hash of the content read back after the burst.
    pub final_hash: String,
    /// When each acknowledged update was acknowledged (since the run's start).
    pub committed: Vec<Duration>,
    /// Commit order of each content by sequence: the `resourceVersion` the API server returned (0 for the
    /// creation and for updates whose request failed). Two update tasks can write one resource at once, and the
    /// API server may commit them in another order than they were sent (seen around an API server restart).
    pub commit_rv: Vec<u64>,
}

impl ResourceContents {
    fn seq_of(&self, hash: &str) -> Option<usize> {
        self.hashes.iter().position(|h| h == hash)
    }

    /// Where content `seq` stands in the resource's history: in commit order; an update without a known commit
    /// (creation, failed request) stands right after the nearest acknowledged content sent before it.
    fn rank(&self, seq: usize) -> (u64, usize) {
        let known = |s: usize| self.commit_rv.get(s).copied().filter(|rv| *rv > 0);
        let rv = (0..=seq).rev().find_map(known).unwrap_or(0);
        (rv, seq)
    }
}

/// One workload's history.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadHistory {
    /// `Kind ns/name`, for problem reports.
    pub label: String,
    /// Index of the resource it uses.
    pub resource: usize,
    /// When it was created (0 for those present from the start).
    pub since: Duration,
    /// Its template writes, in watch order.
    pub writes: Vec<TemplateWrite>,
    /// Its reload marks read back at the end; `None` when it no longer exists (Rollouts deleted with their CRD
    /// are not required to converge, but their writes are classified).
    pub final_marks: Option<BTreeMap<String, String>>,
}

/// The figures of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Content updates the API server acknowledged.
    pub updates: usize,
    /// Reloads upstream would make: (workload, acknowledged update of its resource) pairs, for workloads that
    /// exist at the end. With coalescing fewer rollouts are correct.
    pub expected: usize,
    /// Workloads whose resource changed: each must end on the final content.
    pub must_converge: usize,
    /// Template writes seen.
    pub rollouts: usize,
    /// Workloads not carrying their resource's final hash at the end.
    pub missed: usize,
    /// Non-progressive writes before convergence: `same_hash + stale + unknown`.
    pub duplicates: usize,
    /// Writes that changed no reload mark.
    pub same_hash: usize,
    /// Writes that set a mark to content not newer than what was already rolled.
    pub stale: usize,
    /// Writes that set a mark to a hash of no content of the workload's resource.
    pub unknown: usize,
    /// Writes after convergence.
    pub spurious: usize,
    /// Writes first seen in a relist of the runner's watch (each may stand for several): should be 0, else the
    /// duplicate count may be too low.
    pub blind: usize,
    /// Every workload converged within the timeout.
    pub converged: bool,
    /// One line per problem found (at most [`MAX_PROBLEMS`]).
    pub problems: Vec<String>,
}

impl Figures {
    /// The required outcome: nothing missed, duplicated or spurious, every write classified, converged.
    pub fn clean(&self) -> bool {
        self.converged && self.missed == 0 && self.duplicates == 0 && self.spurious == 0 && self.blind == 0
    }

    fn problem(&mut self, line: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(line);
        }
    }
}

/// Problem lines kept per run.
pub const MAX_PROBLEMS: usize = 30;

/// Computes the figures; `converged_at`: when every workload carried its final hash (`None`: never).
pub fn analyze(
    workloads: &[WorkloadHistory],
    resources: &[ResourceContents],
    converged_at: Option<Duration>,
) -> Figures {
    let mut f = Figures {
        updates: resources.iter().map(|r| r.committed.len()).sum(),
        converged: converged_at.is_some(),
        ..Figures::default()
    };
    for w in workloads {
        let Some(res) = resources.get(w.resource) else { continue };
        classify_writes(&mut f, w, res, converged_at);
        let Some(marks) = &w.final_marks else { continue };
        f.expected += res.committed.iter().filter(|t| **t > w.since).count();
        if !must_converge(w.since, res) {
            continue;
        }
        f.must_converge += 1;
        if !marks.values().any(|h| *h == res.final_hash) {
            let final_seq = res.seq_of(&res.final_hash).unwrap_or(usize::MAX);
            f.missed += 1;
            f.problem(format!("{}: missed: final content #{final_seq} not on the template (marks {marks:?})", w.label));
        }
    }
    f.duplicates = f.same_hash + f.stale + f.unknown;
    f
}

/// Whether a workload created at `since` must end on `res`'s final content: the resource changed (for a
/// workload created mid-run: an update was acknowledged after its creation).
pub fn must_converge(since: Duration, res: &ResourceContents) -> bool {
    let final_seq = res.seq_of(&res.final_hash).unwrap_or(usize::MAX);
    final_seq > 0 && (since.is_zero() || res.committed.iter().any(|t| *t > since))
}

fn classify_writes(f: &mut Figures, w: &WorkloadHistory, res: &ResourceContents, converged_at: Option<Duration>) {
    let mut best = res.rank(0);
    for write in &w.writes {
        f.rollouts += 1;
        let at = write.at.as_secs_f64();
        if write.blind {
            f.blind += 1;
            f.problem(format!("{}: write at {at:.1} s first seen in a relist (may stand for several)", w.label));
        }
        if converged_at.is_some_and(|c| write.at > c) {
            f.spurious += 1;
            f.problem(format!("{}: spurious write at {at:.1} s (after convergence): {:?}", w.label, write.changed));
            continue;
        }
        let seqs: Vec<Option<usize>> = write.changed.iter().map(|(_, h)| res.seq_of(h)).collect();
        if seqs.is_empty() {
            f.same_hash += 1;
            f.problem(format!("{}: duplicate at {at:.1} s: template rewritten, no reload mark changed", w.label));
        } else if seqs.iter().any(Option::is_none) {
            f.unknown += 1;
            f.problem(format!("{}: duplicate at {at:.1} s: unknown hash {:?}", w.label, write.changed));
        } else {
            let newest = seqs.into_iter().flatten().map(|s| res.rank(s)).max().unwrap_or(res.rank(0));
            if newest <= best {
                f.stale += 1;
                f.problem(format!(
                    "{}: duplicate at {at:.1} s: content #{} after #{} was rolled (commit order)",
                    w.label, newest.1, best.1
                ));
            } else {
                best = newest;
            }
        }
    }
}

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;
