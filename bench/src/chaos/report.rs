//! The chaos report: one table row per fault and strategy, then what each fault did and any problem found.

use serde::{Deserialize, Serialize};

use super::run::FaultResult;

/// Every run of one invocation.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChaosReport {
    /// The command line.
    pub command: String,
    /// `nproc`, memory and CPU model.
    pub machine: String,
    /// The runs that completed.
    pub results: Vec<FaultResult>,
    /// Runs that could not be completed (setup failures, timeouts), with the error.
    pub failures: Vec<String>,
}

impl ChaosReport {
    /// Every run completed and is clean.
    pub fn clean(&self) -> bool {
        self.failures.is_empty() && self.results.iter().all(FaultResult::clean)
    }
}

/// The report as markdown.
pub fn markdown(report: &ChaosReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("# Chaos run\n\n**Command:** `{}`\n\n**Machine:** {}\n\n", report.command, report.machine));
    out.push_str(
        "| # | Fault | Strategy | Workloads | Updates | Expected | Rollouts | Missed | Duplicate | Spurious | \
         Converged (s) | Clean |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|\n",
    );
    for r in &report.results {
        let f = &r.figures;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.number,
            r.title,
            r.strategy.flag(),
            r.workloads,
            f.updates,
            f.expected,
            f.rollouts,
            f.missed,
            f.duplicates,
            f.spurious,
            r.converge_s.map_or("never".to_owned(), |s| format!("{s:.1}")),
            if r.clean() { "yes" } else { "**no**" },
        ));
    }
    out.push_str("\n## What each fault did\n\n");
    for r in &report.results {
        out.push_str(&format!("- **{} / {}** ({:.0} s):", r.number, r.strategy.flag(), r.duration_s));
        let mut notes = r.evidence.clone();
        notes
            .push(format!("{} template writes seen, {} logged by the controller", r.figures.rollouts, r.logged_writes));
        if r.failed_updates > 0 {
            notes.push(format!("{} update requests failed", r.failed_updates));
        }
        if let Some(n) = r.watch_restarts {
            notes.push(format!("reloader_watch_restarts_total {n}"));
        }
        if r.fault != super::Fault::EtcdCompaction && r.watch_410 > 0 {
            notes.push(format!("{} watch errors with 410 Gone", r.watch_410));
        }
        out.push_str(&format!(" {}.\n", notes.join("; ")));
        let f = &r.figures;
        if f.duplicates > 0 {
            out.push_str(&format!(
                "  - duplicates: {} same-hash, {} stale, {} unknown hash\n",
                f.same_hash, f.stale, f.unknown
            ));
        }
        if f.blind > 0 {
            out.push_str(&format!("  - {} writes first seen in a relist (unclassified)\n", f.blind));
        }
        for v in &r.violations {
            out.push_str(&format!("  - violation: {v}\n"));
        }
        for e in &r.unexpected_exits {
            out.push_str(&format!("  - controller exited on its own: {e}\n"));
        }
        for p in &f.problems {
            out.push_str(&format!("  - {p}\n"));
        }
    }
    if !report.failures.is_empty() {
        out.push_str("\n## Runs that did not complete\n\n");
        for f in &report.failures {
            out.push_str(&format!("- {f}\n"));
        }
    }
    out
}
