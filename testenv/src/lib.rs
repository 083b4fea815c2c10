//! The project's real Kubernetes test environment.
//!
//! - [`binaries`] builds (or finds cached) control-plane binaries from the Go module proxy via `build.sh`.
//! - [`cluster`] runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK on loopback.
//! - [`harness`] is what integration tests use: a client, a namespace per test, bounded waits.
//!
//! The `testenv` binary wraps these for `make test` (`testenv run -- cargo test …`) and `make run`.

pub mod binaries;
pub mod cluster;
pub mod harness;
pub mod kubeconfig;
pub mod pki;
pub mod process;

use std::path::PathBuf;

/// Everything that can go wrong while building or running the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or socket operation failed.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Certificate generation failed.
    #[error("generating {what}: {source}")]
    Pki { what: &'static str, source: rcgen::Error },
    /// A component binary is missing.
    #[error("{path} does not exist; run testenv/build.sh")]
    MissingBinary { path: PathBuf },
    /// A process could not be started.
    #[error("starting {program}: {source}")]
    Spawn { program: PathBuf, source: std::io::Error },
    /// A component exited while it should be running.
    #[error("{name} exited ({status}); see {log}")]
    Exited { name: &'static str, status: String, log: PathBuf },
    /// A readiness wait ran out of time.
    #[error("timed out waiting for {what}")]
    Timeout { what: String },
    /// The control plane did not come up; carries the component log tails.
    #[error("control plane not ready: {what}\n{logs}")]
    NotReady { what: String, logs: String },
    /// The binaries' build script failed.
    #[error("building the control plane failed ({status}); its output is above")]
    Build { status: String },
    /// Reading a kubeconfig failed.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    /// An API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[source] kube::Error),
    /// JSON (de)serialization failed.
    #[error("json: {0}")]
    Json(#[source] serde_json::Error),
    /// No component of that name runs in this control plane.
    #[error("no control-plane component named {0}")]
    UnknownComponent(String),
}

/// Installs the process-wide rustls crypto provider (ring, like kube's default) once; later calls are no-ops.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Startup shared by the `testenv` and `bench` binaries: logs to stderr (kube's client logs every failed
/// readiness poll at error level while components start, so it is silenced), the crypto provider, and a
/// current-thread runtime — control-plane children get `PR_SET_PDEATHSIG` for the spawning thread, which must
/// outlive them. `None` (after a message naming `program`) when the runtime cannot start.
pub fn tool_runtime(program: &str) -> Option<tokio::runtime::Runtime> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client=off,tower_http=off"));
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_target(false).with_env_filter(filter).init();
    install_crypto_provider();
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("{program}: cannot start a runtime: {e}");
            None
        }
    }
}
