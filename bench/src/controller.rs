//! The controller under test: any binary taking upstream Reloader's flags, run as a child process with a
//! kubeconfig of its own, sampled from `/proc` while it runs.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

use crate::{
    Error,
    measure::procfs::{self, Sample},
};

/// How often the child's CPU and memory are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// A controller command line: `<program> <args…>`, split on whitespace (no shell quoting).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerSpec {
    /// Short name for reports (`ours`, `baseline`).
    pub label: String,
    /// The command line as given.
    pub command: String,
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

impl ControllerSpec {
    /// Parses a command line.
    pub fn parse(label: &str, command: &str) -> Result<Self, Error> {
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words.next().ok_or_else(|| Error::Invalid(format!("empty {label} controller command")))?;
        Ok(Self { label: label.into(), command: command.trim().into(), program: program.into(), args: words.collect() })
    }
}

impl ControllerSpec {
    /// Fails when the program is a path that does not exist (a bare name is looked up in `PATH` by the OS).
    pub fn ensure_built(&self) -> Result<(), Error> {
        let is_path = self.program.components().count() > 1;
        if is_path && !self.program.exists() {
            return Err(Error::Invalid(format!(
                "{} does not exist (build it first: make bench-build)",
                self.program.display()
            )));
        }
        Ok(())
    }
}

/// The `host:port` of a controller's metrics server, from its startup line in `log`.
pub fn metrics_addr_in(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains("serving /metrics"))?;
    let addr = line.rsplit(" on ").next()?.split_whitespace().next()?;
    Some(addr.to_owned())
}

/// A running controller process.
pub struct Running {
    child: Child,
    pid: u32,
    command: String,
    log: PathBuf,
    /// When it was started.
    pub started: Instant,
    samples: Arc<Mutex<Vec<Sample>>>,
    sampler: tokio::task::JoinHandle<()>,
    epoch: Instant,
}

impl Running {
    /// Starts `spec` plus `extra_args` with `KUBECONFIG=kubeconfig` and `env`, output appended to `log`.
    /// Samples are timed from `epoch`.
    pub fn spawn(
        spec: &ControllerSpec,
        extra_args: &[String],
        env: &[(String, String)],
        kubeconfig: &Path,
        log: &Path,
        epoch: Instant,
    ) -> Result<Self, Error> {
        let io = |source| Error::Io { path: log.to_owned(), source };
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(io)?;
        let err = out.try_clone().map_err(io)?;
        let command = format!("{} {}", spec.command, extra_args.join(" ")).trim().to_owned();
        let child = Command::new(&spec.program)
            .args(&spec.args)
            .args(extra_args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn { command: command.clone(), source })?;
        let started = Instant::now();
        let pid = child.id().ok_or_else(|| Error::ControllerExited {
            command: command.clone(),
            status: "exited at once".into(),
            log: log.to_owned(),
        })?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        let sampler = tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tick.tick().await;
                let Some(s) = procfs::sample(pid, epoch.elapsed()) else { break };
                sink.lock().unwrap_or_else(PoisonError::into_inner).push(s);
            }
        });
        Ok(Self { child, pid, command, log: log.to_owned(), started, samples, sampler, epoch })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Fails if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::ControllerExited {
                command: self.command.clone(),
                status: status.to_string(),
                log: self.log.clone(),
            }),
            Err(e) => Err(Error::Io { path: self.log.clone(), source: e }),
        }
    }

    /// Takes a sample now (window edges) and returns it.
    pub fn sample_now(&self) -> Option<Sample> {
        let s = procfs::sample(self.pid, self.epoch.elapsed())?;
        self.samples.lock().unwrap_or_else(PoisonError::into_inner).push(s);
        Some(s)
    }

    /// Every sample so far.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Kills the process at once (SIGKILL, as a crash or an OOM kill would) and reaps it.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
        self.sampler.abort();
    }

    /// Stops the process like a pod deletion does (SIGTERM, SIGKILL after 10 s) and returns its samples.
    pub async fn stop(mut self) -> Vec<Sample> {
        let _ = self.sample_now();
        // NB: no libc (no unsafe): `kill` sends the signal. If it cannot, SIGKILL below still stops the child.
        let _ = Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status().await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
        self.sampler.abort();
        self.samples()
    }
}
