//! Where chaos runs: a local control plane the runner starts (every fault), or an existing cluster from a
//! kubeconfig (faults that only touch the controller and the API: 1, 4–7). The local plane's processes are
//! signalled directly; etcd is reached through its v3 JSON gateway on its client URL.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use kube::Client;
use testenv::cluster::{ControlPlane, Options};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::Mutex,
};

use crate::{
    Error,
    env::{CONTROLLER_USER, renice_reactors},
};

/// The cluster, and the local control plane when the runner started it.
pub struct ChaosEnv {
    /// Admin client for the runner's own requests.
    pub client: Client,
    /// Kubeconfig handed to the controller (a `system:masters` user of its own on the local plane).
    pub controller_kubeconfig: PathBuf,
    /// Results and logs.
    pub out_dir: PathBuf,
    plane: Option<Mutex<ControlPlane>>,
}

impl ChaosEnv {
    /// Starts a local control plane in `<target>/testenv/chaos` (2 KWOK nodes; the components that only react
    /// to rollouts at nice 10, as for the benchmarks).
    pub async fn local(target_dir: &Path, out_dir: PathBuf) -> Result<Self, Error> {
        let state_dir = target_dir.join("testenv").join("chaos");
        let plane = ControlPlane::start(&Options {
            bin_dir: testenv::binaries::ensure_built()?,
            state_dir: state_dir.clone(),
            nodes: 2,
            ready_timeout: Duration::from_secs(120),
            extra_apiserver_args: Vec::new(),
            extra_controller_manager_args: Vec::new(),
        })
        .await?;
        let controller_kubeconfig = state_dir.join("controller.kubeconfig");
        plane.write_user_kubeconfig(&controller_kubeconfig, CONTROLLER_USER, &["system:masters"])?;
        let client = plane.client().await?;
        renice_reactors(&plane);
        Ok(Self { client, controller_kubeconfig, out_dir, plane: Some(Mutex::new(plane)) })
    }

    /// Uses an existing cluster; the controller gets the same kubeconfig.
    pub async fn external(kubeconfig: PathBuf, out_dir: PathBuf) -> Result<Self, Error> {
        let client = testenv::cluster::client_from_kubeconfig(&kubeconfig).await?;
        Ok(Self { client, controller_kubeconfig: kubeconfig, out_dir, plane: None })
    }

    /// Whether the runner started the control plane (faults 2 and 3 need it).
    pub fn is_local(&self) -> bool {
        self.plane.is_some()
    }

    /// The process id of a local control-plane component.
    pub async fn pid(&self, component: &str) -> Result<u32, Error> {
        let plane = self.plane.as_ref().ok_or_else(|| Error::Invalid("no local control plane".into()))?;
        let pids = plane.lock().await.pids();
        pids.into_iter()
            .find_map(|(name, pid)| (name == component).then_some(pid))
            .ok_or_else(|| Error::Invalid(format!("{component} is not running")))
    }

    /// Compacts etcd to its current revision (physically: older revisions are gone, a watch from them gets
    /// "required revision has been compacted"); returns the revision.
    pub async fn compact_etcd(&self) -> Result<u64, Error> {
        let plane = self.plane.as_ref().ok_or_else(|| Error::Invalid("no local control plane".into()))?;
        let url = plane.lock().await.etcd_url().to_owned();
        let addr = url.trim_start_matches("http://");
        // Any range answer carries the store's current revision in its header; key "\0" = "AA==".
        let (_, body) = http(addr, "POST", "/v3/kv/range", r#"{"key":"AA=="}"#).await?;
        let header: serde_json::Value = serde_json::from_str(&body)?;
        let revision: u64 = header
            .pointer("/header/revision")
            .and_then(|r| r.as_str()?.parse().ok())
            .ok_or_else(|| Error::Invalid(format!("etcd range answer without a revision: {body}")))?;
        let request = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        let (status, body) = http(addr, "POST", "/v3/kv/compaction", &request).await?;
        if status != 200 {
            return Err(Error::Invalid(format!("etcd compaction to {revision}: HTTP {status}: {body}")));
        }
        Ok(revision)
    }

    /// Kills kube-apiserver and starts it again with the same flags; returns how long until it was ready.
    pub async fn restart_apiserver(&self) -> Result<Duration, Error> {
        let plane = self.plane.as_ref().ok_or_else(|| Error::Invalid("no local control plane".into()))?;
        let start = Instant::now();
        plane.lock().await.restart("kube-apiserver", Duration::from_secs(120)).await?;
        Ok(start.elapsed())
    }

    /// Stops the local control plane, if any.
    pub async fn stop(&mut self) {
        if let Some(plane) = self.plane.take() {
            plane.into_inner().stop().await;
        }
    }
}

/// Sends `SIG<signal>` (`KILL`, `STOP`, `CONT`, `TERM`) to `pid` with kill(1) (the workspace forbids the
/// `unsafe` a direct libc call needs). Returns whether it was delivered.
pub fn signal(pid: u32, signal: &str) -> bool {
    std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A minimal HTTP/1.0 request (the answer is then never chunked): returns (status, body).
pub async fn http(addr: &str, method: &str, path: &str, body: &str) -> Result<(u16, String), Error> {
    let io = |source| Error::Io { path: format!("http://{addr}{path}").into(), source };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.map_err(io)?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.map_err(io)?;
        Ok::<_, Error>(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| Error::Timeout(format!("an answer from http://{addr}{path}")))??;
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}
