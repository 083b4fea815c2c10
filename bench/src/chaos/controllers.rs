//! The controller under test as the cluster would run it: one replica, or three `--enable-ha` replicas with
//! their pod name and namespace in the environment. A replica that exits without being told to is restarted
//! (as the kubelet would) and counted; the fault scripts kill, stop and restart replicas on purpose.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};

use super::plane::signal;
use crate::{
    Error,
    controller::{ControllerSpec, Running},
};

/// upstream v1's Lease name (the controller's default `--leader-election-id`).
pub const LEASE: &str = "stakater-reloader-lock";
/// The log line a controller writes once its watches have listed.
const SYNCED: &str = "watches synced";

/// One replica.
struct Replica {
    env: Vec<(String, String)>,
    log: PathBuf,
    running: Option<Running>,
    /// Log length when it was last started: lines after it belong to the current process.
    log_offset: u64,
}

/// The replicas of one run.
pub struct Controllers {
    spec: ControllerSpec,
    args: Vec<String>,
    kubeconfig: PathBuf,
    epoch: Instant,
    replicas: Vec<Replica>,
    /// Replicas that exited without being told to (restarted, as by the kubelet).
    pub unexpected_exits: Vec<String>,
}

impl Controllers {
    /// `count` replicas of `spec` plus `args`; `env_of(i)` is replica i's extra environment. Logs go to
    /// `<log_stem>-r<i>.log`. Nothing is started yet.
    pub fn new(
        spec: &ControllerSpec,
        args: Vec<String>,
        kubeconfig: &Path,
        log_stem: &Path,
        count: usize,
        env_of: impl Fn(usize) -> Vec<(String, String)>,
        epoch: Instant,
    ) -> Self {
        let replicas = (0..count)
            .map(|i| Replica {
                env: env_of(i),
                log: PathBuf::from(format!("{}-r{i}.log", log_stem.display())),
                running: None,
                log_offset: 0,
            })
            .collect();
        Self {
            spec: spec.clone(),
            args,
            kubeconfig: kubeconfig.to_owned(),
            epoch,
            replicas,
            unexpected_exits: Vec::new(),
        }
    }

    /// Number of replicas.
    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    /// Starts replica `i` (its log is appended to).
    pub fn start(&mut self, i: usize) -> Result<(), Error> {
        let r = &mut self.replicas[i];
        r.log_offset = std::fs::metadata(&r.log).map(|m| m.len()).unwrap_or(0);
        r.running = Some(Running::spawn(&self.spec, &self.args, &r.env, &self.kubeconfig, &r.log, self.epoch)?);
        Ok(())
    }

    /// Starts every replica.
    pub fn start_all(&mut self) -> Result<(), Error> {
        (0..self.len()).try_for_each(|i| self.start(i))
    }

    /// SIGKILLs replica `i` (a crash, an OOM kill, a node loss); it stays down until [`Controllers::start`].
    pub async fn kill(&mut self, i: usize) {
        if let Some(r) = self.replicas[i].running.take() {
            r.kill().await;
        }
    }

    /// Sends `SIG<sig>` (`STOP`, `CONT`) to replica `i`.
    pub fn signal(&self, i: usize, sig: &str) -> bool {
        self.replicas[i].running.as_ref().is_some_and(|r| signal(r.pid(), sig))
    }

    /// Restarts any replica that exited on its own (it is recorded in `unexpected_exits`).
    pub fn supervise(&mut self) -> Result<(), Error> {
        for i in 0..self.len() {
            let exited = self.replicas[i].running.as_mut().is_some_and(|r| r.check_alive().is_err());
            if exited {
                let at = self.epoch.elapsed().as_secs_f64();
                tracing::warn!(replica = i, "controller exited on its own at {at:.1} s; restarting it");
                self.unexpected_exits.push(format!("r{i} at {at:.1} s"));
                self.start(i)?;
            }
        }
        Ok(())
    }

    /// Sleeps for `period`, supervising every 250 ms.
    pub async fn pause(&mut self, period: Duration) -> Result<(), Error> {
        let end = Instant::now() + period;
        while Instant::now() < end {
            self.supervise()?;
            tokio::time::sleep(end.saturating_duration_since(Instant::now()).min(Duration::from_millis(250))).await;
        }
        Ok(())
    }

    /// Waits until replica `i`'s current process has logged that its watches synced.
    pub async fn wait_synced(&mut self, i: usize, timeout: Duration) -> Result<(), Error> {
        let start = Instant::now();
        while !self.current_log(i).contains(SYNCED) {
            self.supervise()?;
            if start.elapsed() > timeout {
                let log = self.replicas[i].log.display().to_string();
                return Err(Error::Timeout(format!("controller replica {i} to sync its watches (see {log})")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// The log of replica `i`'s current process.
    fn current_log(&self, i: usize) -> String {
        let r = &self.replicas[i];
        let text = std::fs::read(&r.log).unwrap_or_default();
        let from = usize::try_from(r.log_offset).unwrap_or(0).min(text.len());
        String::from_utf8_lossy(&text[from..]).into_owned()
    }

    /// Lines of every replica's whole log (all its processes) containing `needle`.
    pub fn count_log(&self, needle: &str) -> usize {
        let logs = self.replicas.iter().map(|r| std::fs::read_to_string(&r.log).unwrap_or_default());
        logs.map(|text| text.lines().filter(|l| l.contains(needle)).count()).sum()
    }

    /// `host:port` of replica `i`'s metrics server (from its startup line), when running.
    pub fn metrics_addr(&self, i: usize) -> Option<String> {
        self.replicas[i].running.as_ref()?;
        crate::controller::metrics_addr_in(&self.current_log(i))
    }

    /// Log files, for the report.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.replicas.iter().map(|r| r.log.clone()).collect()
    }

    /// Stops every running replica like a pod deletion (SIGTERM).
    pub async fn stop_all(&mut self) {
        for r in &mut self.replicas {
            if let Some(running) = r.running.take() {
                let _ = running.stop().await;
            }
        }
    }
}

/// The holder of the leader-election Lease in `namespace`, if any.
pub async fn lease_holder(client: &Client, namespace: &str) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), namespace).get_opt(LEASE).await.ok().flatten()?;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}
