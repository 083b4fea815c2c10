//! Results: one [`ScenarioResult`] per scenario and controller, rendered as markdown tables, JSON and SVG
//! latency plots, with ours/baseline ratios ([`compare`]).

pub mod compare;
pub mod markdown;
pub mod svg;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::measure::{actions::ActionStats, audit::ApiCounts, procfs::ProcessStats, stats::LatencySummary};

/// The outcome of one scenario against one controller.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// `S1`…`S13`, `M1`.
    pub scenario: String,
    /// What the scenario does.
    pub title: String,
    /// Controller label (`ours`, `baseline`).
    pub controller: String,
    /// The controller's command line, scenario flags included.
    pub command: String,
    /// Seconds the updates ran for.
    pub duration_s: f64,
    /// Namespaces, resources and workloads at the start.
    pub namespaces: usize,
    /// Resources.
    pub configs: usize,
    /// Workloads (S5: also those created during the run).
    pub workloads: usize,
    /// Expected vs observed reloads.
    pub actions: ActionStats,
    /// `actions.exact()`: every expected reload seen once, nothing extra.
    pub exact: bool,
    /// `actions.correct()`: nothing missed or extra; skipping superseded content allowed.
    pub correct: bool,
    /// Update sent → template change seen, for required reloads.
    pub latency: LatencySummary,
    /// The samples behind `latency` (ms), for plots.
    pub latencies_ms: Vec<f64>,
    /// Deployments going from running to paused (S12).
    pub pause_cycles: usize,
    /// API requests of the controller in the measurement window; `None` without an audit log.
    pub api: Option<ApiCounts>,
    /// Template writes per rollout seen by the bench (1.0 = one write per reload); `None` without an audit log.
    pub writes_per_reload: Option<f64>,
    /// CPU and memory of the controller in the measurement window.
    pub process: ProcessStats,
    /// Controller start → first reload seen (ms); for S6, the restart too.
    pub startup_to_ready_ms: Vec<f64>,
    /// Bench writes that failed (they expect nothing).
    pub failed_writes: usize,
    /// Round trip of the bench's own update requests: the API server's share of every latency.
    pub update_rtt: LatencySummary,
    /// Another client's GET and LIST requests through the window (`measure::bystander`): how much the
    /// controller's requests slow down everyone else's.
    #[serde(default)]
    pub bystander: LatencySummary,
    /// The bystander's requests that failed.
    #[serde(default)]
    pub bystander_errors: usize,
    /// CPU seconds of each control-plane component in the window (local control plane only): on a small
    /// machine the rollouts the controller triggers compete with it for the same cores.
    pub control_plane_cpu_s: BTreeMap<String, f64>,
}

/// Everything one invocation produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The command line the bench was run with.
    pub command: String,
    /// Machine description (cores, memory, CPU model).
    pub machine: String,
    /// Seconds each scenario's updates ran for.
    pub duration_s: f64,
    /// Every result, in run order.
    pub results: Vec<ScenarioResult>,
    /// Scenario runs that failed, with the error.
    pub failures: Vec<String>,
}

/// One line describing the machine: `nproc`, memory and CPU model from `/proc`.
pub fn describe_machine() -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(str::trim)
        .unwrap_or("unknown CPU")
        .to_owned();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    format!("{cores} cores (nproc), {:.1} GiB RAM, {model}", mem_kib as f64 / 1024.0 / 1024.0)
}
