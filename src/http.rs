//! The HTTP endpoints: `/metrics`, `/live` (upstream v1: 200 `alive`, 500 once leadership is lost),
//! `/healthz` (the process serves), `/readyz` (every watch has synced, and none has been failing for longer
//! than the bound).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Health flags shared by the controller and the endpoints.
#[derive(Debug)]
pub struct Health {
    synced: AtomicBool,
    watch_failing: AtomicBool,
    live: AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Self { synced: AtomicBool::new(false), watch_failing: AtomicBool::new(false), live: AtomicBool::new(true) }
    }
}

impl Health {
    /// Every watch has completed its first list.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// Some watch has been failing for longer than the readiness bound (or recovered).
    pub fn set_watch_failing(&self, failing: bool) {
        self.watch_failing.store(failing, Ordering::Relaxed);
    }

    /// Marks the process not live (upstream v1: after losing leadership, so the kubelet restarts it).
    pub fn set_not_live(&self) {
        self.live.store(false, Ordering::Relaxed);
    }

    /// `Ok` when ready, else why not.
    pub fn readiness(&self) -> Result<(), &'static str> {
        if !self.synced.load(Ordering::Relaxed) {
            return Err("watches have not synced yet");
        }
        if self.watch_failing.load(Ordering::Relaxed) {
            return Err("a watch has been failing for too long");
        }
        Ok(())
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
    match s.health.readiness() {
        Ok(()) => (StatusCode::OK, "ok"),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// Parses Go-style listen addresses: `:9090` means every interface.
pub fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_owned() };
    full.parse().map_err(|e| format!("invalid listen address {text:?}: {e}"))
}

/// Binds `addr` and serves `router` until `shutdown`; returns the bound address once listening.
pub async fn serve(addr: SocketAddr, router: Router, shutdown: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
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
        assert_eq!(parse_listen_addr(":9090").map(|a| a.to_string()), Ok("0.0.0.0:9090".to_owned()));
        assert_eq!(parse_listen_addr("127.0.0.1:0").map(|a| a.port()), Ok(0));
        assert!(parse_listen_addr("nope").is_err());
    }

    #[test]
    fn readiness_needs_sync_and_healthy_watches() {
        let h = Health::default();
        assert_eq!(h.readiness(), Err("watches have not synced yet"));
        h.set_synced();
        assert_eq!(h.readiness(), Ok(()));
        h.set_watch_failing(true);
        assert!(h.readiness().is_err());
        h.set_watch_failing(false);
        assert_eq!(h.readiness(), Ok(()));
    }
}
