//! The metrics reported per scenario and their ours/baseline ratios.

use super::ScenarioResult;

/// A reported metric: its name and how to read it from a result (`None` = not measured).
pub struct Metric {
    /// Row name.
    pub name: &'static str,
    /// The value.
    pub value: fn(&ScenarioResult) -> Option<f64>,
}

fn count(v: usize) -> Option<f64> {
    Some(v as f64)
}

fn plane_cpu(r: &ScenarioResult) -> Option<f64> {
    (!r.control_plane_cpu_s.is_empty()).then(|| r.control_plane_cpu_s.values().sum())
}

/// Every metric, in report order.
pub const METRICS: &[Metric] = &[
    Metric { name: "updates sent", value: |r| count(r.actions.updates) },
    Metric { name: "reloads expected", value: |r| count(r.actions.expected) },
    Metric { name: "reloads observed", value: |r| count(r.actions.observed) },
    Metric { name: "superseded (skipped for newer content)", value: |r| count(r.actions.superseded) },
    Metric { name: "missed", value: |r| count(r.actions.missed) },
    Metric { name: "duplicates", value: |r| count(r.actions.duplicates) },
    Metric {
        name: "unexpected + rolled unchanged",
        value: |r| count(r.actions.unexpected + r.actions.rolled_unchanged),
    },
    Metric { name: "rollouts (template changes seen)", value: |r| count(r.actions.rollouts) },
    Metric { name: "pause cycles", value: |r| count(r.pause_cycles) },
    Metric { name: "latency p50 (ms)", value: |r| r.latency.p50_ms },
    Metric { name: "latency p95 (ms)", value: |r| r.latency.p95_ms },
    Metric { name: "latency p99 (ms)", value: |r| r.latency.p99_ms },
    Metric { name: "latency max (ms)", value: |r| r.latency.max_ms },
    Metric { name: "bench update round trip p50 (ms)", value: |r| r.update_rtt.p50_ms },
    Metric { name: "another client's GET/LIST p50 (ms)", value: |r| r.bystander.p50_ms },
    Metric { name: "another client's GET/LIST p99 (ms)", value: |r| r.bystander.p99_ms },
    Metric {
        name: "another client's failed requests",
        value: |r| (r.bystander.count > 0).then_some(r.bystander_errors as f64),
    },
    Metric { name: "control-plane CPU (s)", value: |r| plane_cpu(r) },
    Metric { name: "kube-apiserver CPU (s)", value: |r| r.control_plane_cpu_s.get("kube-apiserver").copied() },
    Metric { name: "API requests", value: |r| r.api.as_ref().map(|a| a.total as f64) },
    Metric { name: "template writes", value: |r| r.api.as_ref().map(|a| a.template_writes as f64) },
    Metric { name: "writes per reload", value: |r| r.writes_per_reload },
    Metric { name: "metadata-only workload writes", value: |r| r.api.as_ref().map(|a| a.metadata_writes as f64) },
    Metric {
        name: "refused workload writes (404/409…)",
        value: |r| r.api.as_ref().map(|a| a.failed_workload_writes as f64),
    },
    Metric { name: "event writes", value: |r| r.api.as_ref().map(|a| a.event_writes as f64) },
    Metric { name: "GET + LIST", value: |r| r.api.as_ref().map(|a| a.reads as f64) },
    Metric { name: "API errors (4xx/5xx)", value: |r| r.api.as_ref().map(|a| a.errors as f64) },
    Metric { name: "throttled (429)", value: |r| r.api.as_ref().map(|a| a.throttled as f64) },
    Metric { name: "CPU (s)", value: |r| Some(r.process.cpu_seconds) },
    Metric { name: "RSS after sync (MiB)", value: |r| Some(r.process.rss_start_mib) },
    Metric { name: "RSS at end (MiB)", value: |r| Some(r.process.rss_end_mib) },
    Metric { name: "RSS average (MiB)", value: |r| Some(r.process.rss_avg_mib) },
    Metric { name: "RSS peak, VmHWM (MiB)", value: |r| Some(r.process.rss_peak_mib) },
    Metric { name: "startup to ready (ms)", value: |r| r.startup_to_ready_ms.first().copied() },
];

/// `ours / baseline`; `None` when either is missing or the baseline is 0.
pub fn ratio(ours: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    match (ours, baseline) {
        (Some(o), Some(b)) if b != 0.0 => Some(o / b),
        _ => None,
    }
}

/// One row of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Metric name.
    pub metric: &'static str,
    /// Value per controller, in the order given.
    pub values: Vec<Option<f64>>,
    /// `values[0] / values[1]` when there are two.
    pub ratio: Option<f64>,
}

/// Rows for the results of one scenario (one per controller, ours first).
pub fn rows(results: &[&ScenarioResult]) -> Vec<Row> {
    METRICS
        .iter()
        .map(|m| {
            let values: Vec<Option<f64>> = results.iter().map(|r| (m.value)(r)).collect();
            let ratio = match values.as_slice() {
                [a, b] => ratio(*a, *b),
                _ => None,
            };
            Row { metric: m.name, values, ratio }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{actions::ActionStats, audit::ApiCounts, stats::LatencySummary};

    #[test]
    fn ratios_divide_ours_by_baseline() {
        assert_eq!(ratio(Some(3.0), Some(4.0)), Some(0.75));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
    }

    #[test]
    fn rows_pair_controllers_metric_by_metric() {
        let ours = ScenarioResult {
            actions: ActionStats { updates: 10, expected: 10, observed: 10, rollouts: 10, ..Default::default() },
            latency: LatencySummary { p50_ms: Some(8.0), ..Default::default() },
            api: Some(ApiCounts { total: 20, template_writes: 10, ..Default::default() }),
            ..Default::default()
        };
        let baseline = ScenarioResult {
            actions: ActionStats { updates: 10, expected: 10, observed: 10, rollouts: 10, ..Default::default() },
            latency: LatencySummary { p50_ms: Some(32.0), ..Default::default() },
            api: None,
            ..Default::default()
        };
        let rows = rows(&[&ours, &baseline]);
        let get = |name: &str| rows.iter().find(|r| r.metric == name).cloned().expect("metric exists");
        assert_eq!(get("latency p50 (ms)").ratio, Some(0.25));
        assert_eq!(get("reloads observed").ratio, Some(1.0));
        assert_eq!(get("API requests").values, vec![Some(20.0), None]);
        assert_eq!(get("API requests").ratio, None);
        assert_eq!(rows.len(), METRICS.len());
    }
}
