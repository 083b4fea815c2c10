//! Prometheus metrics with upstream Reloader's names and labels (reloader-behaviour.md §7.1), so existing
//! dashboards and upstream's load test keep working, plus what upstream lacks: watch restarts, index sizes,
//! queue latency measured for real.
//!
//! Upstream v1 double-counts `reloader_reconcile_total`; we count each reconcile once.

use prometheus::{
    Counter, Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    /// `reloader_reload_executed_total{success}`: workload writes that carried a reload.
    pub reload_executed: IntCounterVec,
    /// `reloader_reload_executed_total_by_namespace{success,namespace}` (only with `METRICS_COUNT_BY_NAMESPACE=enabled`).
    pub reload_executed_by_namespace: Option<IntCounterVec>,
    /// `reloader_reconcile_total{result}`.
    pub reconcile: IntCounterVec,
    /// `reloader_reconcile_duration_seconds{result}`.
    pub reconcile_duration: HistogramVec,
    /// `reloader_action_total{workload_kind,result}`.
    pub action: IntCounterVec,
    /// `reloader_action_latency_seconds{workload_kind}`: from the change being observed to the write being
    /// acknowledged.
    pub action_latency: HistogramVec,
    /// `reloader_skipped_total{reason}`.
    pub skipped: IntCounterVec,
    /// `reloader_workqueue_depth`.
    pub queue_depth: IntGauge,
    /// `reloader_workqueue_adds_total`.
    pub queue_adds: IntCounter,
    /// `reloader_workqueue_latency_seconds`: time a key waited in the queue.
    pub queue_latency: Histogram,
    /// `reloader_errors_total{type}`.
    pub errors: IntCounterVec,
    /// `reloader_retries_total`.
    pub retries: IntCounter,
    /// `reloader_events_received_total{event_type,resource_type}`.
    pub events_received: IntCounterVec,
    /// `reloader_workloads_matched_total{kind}`: workloads written for a reload.
    pub workloads_matched: IntCounterVec,
    /// `reloader_watch_restarts_total{resource}` (ours): watch failures that forced a re-watch or relist; `resource`
    /// as in `reloader_watch_failing` (`configmaps`, `deployments.apps`…), each watched one starting at 0.
    pub watch_restarts: IntCounterVec,
    /// `reloader_watch_failing{resource,namespace}` (ours): 1 while that watch fails (forbidden, API removed,
    /// API server unreachable), 0 once it delivers again.
    pub watch_failing: IntGaugeVec,
    /// `reloader_reconcile_panics_total` (ours): reconciles that panicked and were contained (and retried).
    pub panics: IntCounter,
    /// `reloader_index_objects{type}` (ours): resources and workloads in memory; every 10 s also the sizes of
    /// the index's other maps (references, assumed and pending hashes, namespaces…), which stay flat under churn.
    pub index_objects: IntGaugeVec,
    /// `reloader_rollouts{state}` (ours, `--max-concurrent-rollouts`): rollouts in flight, workloads waiting.
    pub rollouts: IntGaugeVec,
    /// `reloader_waiting_workloads{reason}` (ours, issue 17): workloads whose reload waits at a rollout gate
    /// (`held`, `wave`, `window`).
    pub waiting: IntGaugeVec,
    /// `reloader_pod_restarts_stalled` (ours, issue 38): workloads whose `evict-pods`/`delete-pods` restarts have
    /// made no progress for `--rollout-timeout` (a replacement that does not come, a PodDisruptionBudget that
    /// allows none); they go on by themselves when it changes.
    pub pod_restarts_stalled: IntGauge,
    /// `reloader_ready` (ours): 1 while `/readyz` answers 200 (a core kind served somewhere), as of the last list,
    /// watch failure or recovery.
    pub ready: Gauge,
    /// `reloader_write_limiter_wait_seconds_total` (ours): time writes spent waiting for the write rate limit
    /// (`--kube-api-qps`); its rate is the average number of writes waiting, so a rate that stays high says the
    /// limit, not the API server, paces reloads.
    pub write_limiter_wait: Counter,
    /// `rest_client_requests_total{code,method,host}`: every API request the controller makes.
    pub rest_requests: IntCounterVec,
    /// `reloader_alerts_total{result}` (ours): alerts and webhooks sent, failed after retries, or dropped.
    pub alerts: IntCounterVec,
    /// `leader_election_master_status{name}` (controller-runtime's, upstream v2): 1 while leading; `name` is the
    /// Lease name.
    pub leader: IntGaugeVec,
    /// `rest_client_request_duration_seconds{verb,host}` (upstream v1): API request latency.
    pub rest_duration: HistogramVec,
}

/// Label values known up front. Their series start at 0, so `rate()` sees the first increment (a series that
/// appears at 1 hides it from `rate()` and `increase()`, and alerts on it stay silent) and a dashboard shows a line
/// at 0, not "no data".
const RECONCILE_RESULTS: &[&str] = &["success", "skipped", "error"];
const SKIP_REASONS: &[&str] = &[
    "no_data_change",
    "ignored_or_not_selected",
    "strategy_not_updated",
    "rollout_budget",
    "held",
    "wave",
    "window",
    "paused",
    "suspended",
];
const ERROR_TYPES: &[&str] =
    &["handler_error", "watch_error", "event_publish", "event_dropped", "record_refused", "answer_lost"];
const ALERT_RESULTS: &[&str] = &["sent", "failed", "dropped"];

const RECONCILE_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
const ACTION_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// upstream v1's buckets for `rest_client_request_duration_seconds`.
const REST_BUCKETS: &[f64] = &[0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0];
const QUEUE_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    r.register(Box::new(c.clone())).unwrap_or_else(|e| panic!("register {name}: {e}"));
    c
}

/// A counter with one label whose values are known: each starts at 0.
fn counter_vec_of(r: &Registry, name: &str, help: &str, label: &str, values: &[&str]) -> IntCounterVec {
    let c = counter_vec(r, name, help, &[label]);
    for v in values {
        c.with_label_values(&[v]);
    }
    c
}

fn histogram_vec(r: &Registry, name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    r.register(Box::new(h.clone())).unwrap_or_else(|e| panic!("register {name}: {e}"));
    h
}

impl Metrics {
    /// Registers every metric (names are constants: a registration error is a programming error).
    /// `by_namespace` mirrors upstream's `METRICS_COUNT_BY_NAMESPACE=enabled`.
    pub fn new(by_namespace: bool) -> Self {
        let r = Registry::new();
        let reload_executed =
            counter_vec(&r, "reloader_reload_executed_total", "Reloads executed, by success", &["success"]);
        for s in ["true", "false"] {
            reload_executed.with_label_values(&[s]);
        }
        let reload_executed_by_namespace = by_namespace.then(|| {
            counter_vec(
                &r,
                "reloader_reload_executed_total_by_namespace",
                "Reloads executed, by success and namespace",
                &["success", "namespace"],
            )
        });
        let queue_depth = IntGauge::new("reloader_workqueue_depth", "Workloads waiting in the work queue")
            .unwrap_or_else(|e| panic!("{e}"));
        let queue_adds = IntCounter::new("reloader_workqueue_adds_total", "Workloads added to the work queue")
            .unwrap_or_else(|e| panic!("{e}"));
        let queue_latency = Histogram::with_opts(
            HistogramOpts::new("reloader_workqueue_latency_seconds", "Time a workload waited in the queue")
                .buckets(QUEUE_BUCKETS.to_vec()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let retries = IntCounter::new("reloader_retries_total", "Reconciles retried after a transient error")
            .unwrap_or_else(|e| panic!("{e}"));
        let index_objects =
            IntGaugeVec::new(Opts::new("reloader_index_objects", "Objects held in the in-memory index"), &["type"])
                .unwrap_or_else(|e| panic!("{e}"));
        let rollouts = IntGaugeVec::new(
            Opts::new(
                "reloader_rollouts",
                "Rollouts this controller started that are in flight, and workloads waiting",
            ),
            &["state"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let waiting = IntGaugeVec::new(
            Opts::new(
                "reloader_waiting_workloads",
                "Workloads whose reload waits: held after a failed rollout, behind a rollout wave, outside a reload window",
            ),
            &["reason"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let watch_failing = IntGaugeVec::new(
            Opts::new("reloader_watch_failing", "1 while the watch of a resource (in a namespace) is failing"),
            &["resource", "namespace"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let pod_restarts_stalled = IntGauge::new(
            "reloader_pod_restarts_stalled",
            "Workloads whose evict-pods/delete-pods restarts made no progress for --rollout-timeout",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let panics =
            IntCounter::new("reloader_reconcile_panics_total", "Reconciles that panicked, contained and retried")
                .unwrap_or_else(|e| panic!("{e}"));
        let ready = Gauge::new("reloader_ready", "1 while /readyz answers 200: every core kind is watched somewhere")
            .unwrap_or_else(|e| panic!("{e}"));
        let write_limiter_wait = Counter::new(
            "reloader_write_limiter_wait_seconds_total",
            "Time writes spent waiting for the write rate limit (--kube-api-qps)",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let leader = IntGaugeVec::new(
            Opts::new("leader_election_master_status", "1 while this replica is the leader"),
            &["name"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        for c in [
            Box::new(queue_depth.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(queue_adds.clone()),
            Box::new(queue_latency.clone()),
            Box::new(retries.clone()),
            Box::new(index_objects.clone()),
            Box::new(rollouts.clone()),
            Box::new(waiting.clone()),
            Box::new(pod_restarts_stalled.clone()),
            Box::new(watch_failing.clone()),
            Box::new(panics.clone()),
            Box::new(ready.clone()),
            Box::new(write_limiter_wait.clone()),
            Box::new(leader.clone()),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ] {
            r.register(c).unwrap_or_else(|e| panic!("register: {e}"));
        }
        Self {
            reload_executed,
            reload_executed_by_namespace,
            reconcile: counter_vec_of(
                &r,
                "reloader_reconcile_total",
                "Reconciles, by result",
                "result",
                RECONCILE_RESULTS,
            ),
            reconcile_duration: histogram_vec(
                &r,
                "reloader_reconcile_duration_seconds",
                "Reconcile duration",
                &["result"],
                RECONCILE_BUCKETS,
            ),
            action: counter_vec(
                &r,
                "reloader_action_total",
                "Workload actions, by kind and result",
                &["workload_kind", "result"],
            ),
            action_latency: histogram_vec(
                &r,
                "reloader_action_latency_seconds",
                "From a change being observed to the workload write being acknowledged",
                &["workload_kind"],
                ACTION_BUCKETS,
            ),
            skipped: counter_vec_of(
                &r,
                "reloader_skipped_total",
                "Events or reconciles that needed no action, by reason",
                "reason",
                SKIP_REASONS,
            ),
            errors: counter_vec_of(&r, "reloader_errors_total", "Errors, by type", "type", ERROR_TYPES),
            events_received: counter_vec(
                &r,
                "reloader_events_received_total",
                "Watch events received",
                &["event_type", "resource_type"],
            ),
            workloads_matched: counter_vec(
                &r,
                "reloader_workloads_matched_total",
                "Workloads written for a reload",
                &["kind"],
            ),
            rest_requests: counter_vec(
                &r,
                "rest_client_requests_total",
                "Kubernetes API requests by code, method and host",
                &["code", "method", "host"],
            ),
            alerts: counter_vec_of(
                &r,
                "reloader_alerts_total",
                "Alerts and webhooks by result (sent, failed, dropped)",
                "result",
                ALERT_RESULTS,
            ),
            watch_restarts: counter_vec(
                &r,
                "reloader_watch_restarts_total",
                "Watch failures followed by a re-watch",
                &["resource"],
            ),
            queue_depth,
            queue_adds,
            queue_latency,
            retries,
            index_objects,
            rollouts,
            waiting,
            pod_restarts_stalled,
            watch_failing,
            panics,
            ready,
            write_limiter_wait,
            leader,
            rest_duration: histogram_vec(
                &r,
                "rest_client_request_duration_seconds",
                "Kubernetes API request latency, by verb and host",
                &["verb", "host"],
                REST_BUCKETS,
            ),
            registry: r,
        }
    }

    /// Counts one workload write that carried a reload.
    pub fn reload_executed(&self, success: bool, namespace: &str) {
        let s = if success { "true" } else { "false" };
        self.reload_executed.with_label_values(&[s]).inc();
        if let Some(by_ns) = &self.reload_executed_by_namespace {
            by_ns.with_label_values(&[s, namespace]).inc();
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_are_emitted_verbatim() {
        let m = Metrics::new(true);
        m.reload_executed(true, "ns");
        m.action.with_label_values(&["Deployment", "success"]).inc();
        let text = m.encode();
        for line in [
            "reloader_reload_executed_total{success=\"true\"} 1",
            "reloader_reload_executed_total{success=\"false\"} 0",
            "reloader_reload_executed_total_by_namespace{namespace=\"ns\",success=\"true\"} 1",
            "reloader_action_total{result=\"success\",workload_kind=\"Deployment\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(!Metrics::new(false).encode().contains("by_namespace"), "registered only when enabled, as upstream");
    }
}
