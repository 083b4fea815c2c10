//! The HTTP endpoints: `/metrics`, `/live` (upstream v1: 200 `alive`, 500 once leadership is lost),
//! `/healthz` (the process serves), `/readyz` (reloads can happen: every watch has listed or failed, and every
//! core kind is served by at least one of its sources). Degraded is not down: a source whose kind is served
//! another way (a workload kind listed on each change because its watch is forbidden, upstream v1's RBAC), that
//! is optional, or whose kind another namespace's source serves (one namespace of `--namespaces a,b` without its
//! Role: `a` reloads) is named in the body of a 200 (issue 27, finding 4: under upstream's ClusterRole the pod was
//! never Ready; issue 38, finding 5: one namespace without RBAC kept it unready while the others reloaded).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// How long a source must keep failing before `/readyz` reports it (and turns 503 for a core kind).
pub const WATCH_FAILURE_BOUND: Duration = Duration::from_secs(60);
/// A failure run ends when its source has not failed for this long: kube-runtime's watcher retries at most
/// every 30 s (plus jitter), so a source that keeps failing fails again within this gap, and one that resumed
/// its watch without delivering anything (a quiet namespace) stops counting as failing by itself.
const FAILURE_GAP: Duration = Duration::from_secs(75);
/// Errors a run needs before it counts: two transient errors a minute apart are not a failing source.
const FAILURE_MIN_ERRORS: u32 = 3;

/// One watch source's current run of failures.
#[derive(Clone, Debug)]
struct SourceFailure {
    /// Reloads depend on this source alone (a core kind, not served by the list fallback): its failure makes
    /// `/readyz` 503.
    core: bool,
    since: Instant,
    last: Instant,
    errors: u32,
    message: String,
}

/// One watch source as readiness sees it.
#[derive(Clone, Debug)]
struct WatchedSource {
    /// The kind it serves (`configmaps`, `deployments.apps`): a core kind is served while any source of it is.
    kind: &'static str,
    /// A core kind (not optional).
    core: bool,
    /// Its first list has completed.
    listed: bool,
}

/// Health flags shared by the controller and the endpoints.
#[derive(Debug)]
pub struct Health {
    synced: AtomicBool,
    live: AtomicBool,
    bound: Duration,
    /// Every watch source, by name (e.g. `deployments.apps in shop`).
    sources: Mutex<BTreeMap<String, WatchedSource>>,
    /// Failing watch sources, by name.
    failing: Mutex<BTreeMap<String, SourceFailure>>,
    /// Kinds and namespaces where the restart-safety record may not be written: reloads go on, but a change made
    /// while the controller is down is not applied there at its restart. Reported in `/readyz`'s body as
    /// degraded, never as not ready.
    pub records_refused: crate::rules::record_refusals::RecordRefusals,
}

impl Default for Health {
    fn default() -> Self {
        Self::with_bound(WATCH_FAILURE_BOUND)
    }
}

impl Health {
    /// Health whose failing sources count after `bound` (tests use short bounds).
    pub fn with_bound(bound: Duration) -> Self {
        Self {
            synced: AtomicBool::new(false),
            live: AtomicBool::new(true),
            bound,
            sources: Mutex::default(),
            failing: Mutex::default(),
            records_refused: Default::default(),
        }
    }

    fn failing(&self) -> MutexGuard<'_, BTreeMap<String, SourceFailure>> {
        self.failing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sources(&self) -> MutexGuard<'_, BTreeMap<String, WatchedSource>> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every watch has listed or failed once.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// A watch source named `source` serves `kind` (`core`: not an optional kind).
    pub fn register_source(&self, source: &str, kind: &'static str, core: bool) {
        self.sources().entry(source.to_owned()).or_insert(WatchedSource { kind, core, listed: false });
    }

    /// A watch source completed a list.
    pub fn source_listed(&self, source: &str) {
        if let Some(s) = self.sources().get_mut(source) {
            s.listed = true;
        }
    }

    /// A watch source failed at `now`; `core`: reloads depend on it alone (see [`Self::readiness`]). Returns true
    /// when this starts a new run of failures (worth a log line).
    pub fn source_failed(&self, source: &str, core: bool, message: &str, now: Instant) -> bool {
        let mut failing = self.failing();
        if let Some(run) = failing.get_mut(source).filter(|r| now.saturating_duration_since(r.last) <= FAILURE_GAP) {
            run.core = core;
            run.last = now;
            run.errors = run.errors.saturating_add(1);
            message.clone_into(&mut run.message);
            return false;
        }
        let run = SourceFailure { core, since: now, last: now, errors: 1, message: message.to_owned() };
        failing.insert(source.to_owned(), run);
        true
    }

    /// A watch source delivered again. Returns true when it had been failing.
    pub fn source_recovered(&self, source: &str) -> bool {
        self.failing().remove(source).is_some()
    }

    /// Marks the process not live (upstream v1: after losing leadership, so the kubelet restarts it).
    pub fn set_not_live(&self) {
        self.live.store(false, Ordering::Relaxed);
    }

    /// Sources failing at `now` for longer than the bound: (name, core kind, last error).
    pub fn failing_sources(&self, now: Instant) -> Vec<(String, bool, String)> {
        let failing = self.failing();
        let counts = |r: &&SourceFailure| {
            r.errors >= FAILURE_MIN_ERRORS
                && now.saturating_duration_since(r.last) <= FAILURE_GAP
                && r.last.saturating_duration_since(r.since) >= self.bound
        };
        failing.iter().filter(|(_, r)| counts(r)).map(|(n, r)| (n.clone(), r.core, r.message.clone())).collect()
    }

    /// `Ok` with a note on degraded sources when ready, else why not. Ready means reloads can happen: every watch
    /// has listed or failed once, and every core kind (ConfigMaps, Secrets, the built-in workloads, namespaces) is
    /// served by at least one of its sources — one that has listed and has not been failing for longer than the
    /// bound, or one served another way (listed on each change). A source that does not serve its kind (never
    /// listed, or failing) while another source of the kind does is degraded: named in the body, as is a failing
    /// optional kind. Readiness recovers as soon as a source delivers again.
    pub fn readiness(&self, now: Instant) -> Result<String, String> {
        if !self.synced.load(Ordering::Relaxed) {
            return Err("watches have not synced yet".to_owned());
        }
        let (down, degraded) = self.unserved(now);
        if !down.is_empty() {
            return Err(format!(
                "no watch serves {} (failing for more than {:?} or never listed; reloads elsewhere go on):\n{}",
                down.iter()
                    .map(|(kind, _)| kind.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", "),
                self.bound,
                down.iter().map(|(_, line)| line.as_str()).collect::<Vec<_>>().join("\n")
            ));
        }
        let mut body = "ok".to_owned();
        if !degraded.is_empty() {
            body.push_str(&format!("\ndegraded (reloads go on): not watched:\n{}", degraded.join("\n")));
        }
        let refused = self.records_refused.standing(now);
        let refused: Vec<String> = refused
            .iter()
            .map(|(kind, ns)| format!("{} in {ns}: no patch permission", kind.facts().api_resource))
            .collect();
        if !refused.is_empty() {
            body.push_str(&format!(
                "\ndegraded (reloads go on): restart-safety record not written:\n{}",
                refused.join("\n")
            ));
        }
        Ok(body)
    }

    /// The sources that do not serve their kind at `now`, each as `<source>: <why>`: those of core kinds no
    /// source serves, with the kind (down), and the others (degraded), with the sources that serve their kind only
    /// another way (listed on each change) or whose optional kind failed after listing. A failing source never
    /// registered is a kind of its own.
    fn unserved(&self, now: Instant) -> (Vec<(String, String)>, Vec<String>) {
        let failing = self.failing_sources(now);
        let counted: BTreeMap<&str, (bool, &str)> =
            failing.iter().map(|(n, core, m)| (n.as_str(), (*core, m.as_str()))).collect();
        let sources = self.sources();
        let serves = |name: &str, s: &WatchedSource| s.listed && !counted.get(name).is_some_and(|(core, _)| *core);
        let served: BTreeSet<&str> = sources.iter().filter(|(n, s)| serves(n, s)).map(|(_, s)| s.kind).collect();
        let errors = self.failing();
        let (mut down, mut degraded) = (Vec::new(), Vec::new());
        for (name, source) in sources.iter() {
            if serves(name, source) {
                if let Some((_, message)) = counted.get(name.as_str()) {
                    degraded.push(format!("{name}: {message}"));
                }
                continue;
            }
            let why = errors.get(name).map_or("not listed yet", |f| f.message.as_str());
            let line = format!("{name}: {why}");
            if source.core && !served.contains(source.kind) {
                down.push((source.kind.to_owned(), line));
            } else {
                degraded.push(line);
            }
        }
        for (name, core, message) in failing.iter().filter(|(n, _, _)| !sources.contains_key(n)) {
            let line = format!("{name}: {message}");
            if *core { down.push((name.clone(), line)) } else { degraded.push(line) }
        }
        (down, degraded)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

/// The router serving every endpoint.
pub fn router(metrics: Arc<Metrics>, health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/live", get(live))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(AppState { metrics, health })
}

async fn metrics_handler(State(s): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.encode())
}

async fn live(State(s): State<AppState>) -> impl IntoResponse {
    if s.health.live.load(Ordering::Relaxed) {
        (StatusCode::OK, "alive")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "leadership lost")
    }
}

async fn ready(State(s): State<AppState>) -> impl IntoResponse {
    match s.health.readiness(Instant::now()) {
        Ok(body) => (StatusCode::OK, body),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// Parses Go-style listen addresses: `:9090` means every interface, IPv6 and IPv4 (upstream's Go listener is
/// dual-stack; [`serve`] falls back to IPv4 where the kernel has no IPv6).
pub fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("[::]{text}") } else { text.to_owned() };
    full.parse().map_err(|e| format!("invalid listen address {text:?}: {e}"))
}

/// Binds `addr` and serves `router` until `shutdown`; returns the bound address once listening.
pub async fn serve(addr: SocketAddr, router: Router, shutdown: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = match TcpListener::bind(addr).await {
        // `[::]` where IPv6 is disabled: every IPv4 interface instead.
        Err(_) if addr.ip() == std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED) => {
            TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, addr.port())).await?
        }
        bound => bound?,
    };
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).with_graceful_shutdown(async move { shutdown.cancelled().await }).await;
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_accept_go_forms() {
        assert_eq!(parse_listen_addr(":9090").map(|a| a.to_string()), Ok("[::]:9090".to_owned()));
        assert_eq!(parse_listen_addr("127.0.0.1:0").map(|a| a.port()), Ok(0));
        assert!(parse_listen_addr("nope").is_err());
    }

    #[test]
    fn readiness_needs_sync_and_no_core_source_failing_past_the_bound() {
        let h = Health::with_bound(Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(h.readiness(t0), Err("watches have not synced yet".to_owned()));
        h.set_synced();
        assert_eq!(h.readiness(t0), Ok("ok".to_owned()));
        // A core kind failing every 30 s: not ready once the run is 60 s old, named in the body.
        for s in [0, 1, 3, 7, 15, 31, 61] {
            h.source_failed("deployments.apps in a", true, "forbidden", at(s));
        }
        let why = h.readiness(at(62)).expect_err("failing core source");
        assert!(why.contains("deployments.apps in a: forbidden"), "{why}");
        // It delivers again: ready at once.
        assert!(h.source_recovered("deployments.apps in a"));
        assert_eq!(h.readiness(at(62)), Ok("ok".to_owned()));
    }

    #[test]
    fn readiness_does_not_latch_after_sparse_transient_errors() {
        let h = Health::with_bound(Duration::from_secs(60));
        h.set_synced();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Two transient errors 60 s apart, nothing delivered in between (a quiet namespace).
        h.source_failed("configmaps", true, "connection reset", at(0));
        h.source_failed("configmaps", true, "connection reset", at(60));
        assert_eq!(h.readiness(at(61)), Ok("ok".to_owned()));
        // A run that did count ends by itself once the source stops failing, even without a delivery.
        for s in [100, 130, 160, 190] {
            h.source_failed("secrets", true, "timeout", at(s));
        }
        assert!(h.readiness(at(191)).is_err());
        assert_eq!(h.readiness(at(191 + 76)), Ok("ok".to_owned()));
    }

    #[test]
    fn a_failing_optional_kind_is_reported_but_stays_ready() {
        let h = Health::with_bound(Duration::ZERO);
        h.set_synced();
        let now = Instant::now();
        for _ in 0..3 {
            h.source_failed("deploymentconfigs.apps.openshift.io", false, "forbidden", now);
        }
        let body = h.readiness(now).expect("ready");
        assert!(body.contains("degraded") && body.contains("deploymentconfigs.apps.openshift.io: forbidden"), "{body}");
    }

    /// Issue 27: record-less mode (no `patch` on a kind: upstream v1's RBAC on CronJobs) is degraded, not down.
    #[test]
    fn a_refused_record_is_reported_while_it_stands_and_stays_ready() {
        let h = Health::with_bound(Duration::ZERO);
        h.set_synced();
        let now = Instant::now();
        h.records_refused.note(crate::rules::keys::WorkloadKind::CronJob, &"shop".into(), now);
        assert_eq!(
            h.readiness(now),
            Ok("ok\ndegraded (reloads go on): restart-safety record not written:\n\
                cronjobs.batch in shop: no patch permission"
                .to_owned())
        );
        assert_eq!(h.readiness(now + Duration::from_secs(601)), Ok("ok".to_owned()), "tried again after that");
    }

    /// Issue 38, finding 5: one namespace of several that may not be watched is degraded, not down; readiness
    /// fails only once no source of a core kind serves it anywhere.
    #[test]
    fn a_core_kind_served_in_one_namespace_keeps_readiness_and_names_the_other_degraded() {
        let h = Health::with_bound(Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        for ns in ["a", "b"] {
            h.register_source(&format!("configmaps in {ns}"), "configmaps", true);
        }
        h.source_listed("configmaps in a");
        h.source_failed("configmaps in b", true, "forbidden", at(0));
        h.set_synced();
        // At once (never listed), and still after the failure run counts.
        let degraded = "ok\ndegraded (reloads go on): not watched:\nconfigmaps in b: forbidden".to_owned();
        assert_eq!(h.readiness(at(1)), Ok(degraded.clone()));
        for s in [30, 61] {
            h.source_failed("configmaps in b", true, "forbidden", at(s));
        }
        assert_eq!(h.readiness(at(62)), Ok(degraded));
        // The namespace that served fails too, past the bound: no source serves ConfigMaps.
        for s in [62, 92, 123, 124] {
            h.source_failed("configmaps in a", true, "connection refused", at(s));
        }
        let why = h.readiness(at(124)).expect_err("no source serves configmaps");
        assert!(why.starts_with("no watch serves configmaps"), "{why}");
        assert!(
            why.contains("configmaps in a: connection refused") && why.contains("configmaps in b: forbidden"),
            "{why}"
        );
        // One delivers again: ready.
        h.source_recovered("configmaps in a");
        assert!(h.readiness(at(125)).is_ok());
    }
}
