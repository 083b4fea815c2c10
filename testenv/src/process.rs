//! Child processes of the control plane: started with their output in a log file, killed together.
//!
//! Each child is started through `setpriv --pdeathsig SIGKILL`, so the kernel kills it if the supervisor dies
//! without cleaning up (SIGKILL, OOM, a crashed test runner). The supervisor must therefore spawn from a thread
//! that lives as long as the children (a current-thread runtime does).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use tokio::process::{Child, Command};

use crate::Error;

/// One running component.
pub struct Component {
    /// Short name (`etcd`, `kube-apiserver`, …), also the log file's stem.
    pub name: &'static str,
    /// Its log file.
    pub log: PathBuf,
    child: Child,
    program: PathBuf,
    args: Vec<String>,
}

impl Component {
    /// Starts `program args…` with stdout and stderr appended to `<log_dir>/<name>.log`.
    pub fn spawn(name: &'static str, program: &Path, args: &[String], log_dir: &Path) -> Result<Self, Error> {
        let log = log_dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).map_err(|source| Error::Io { path: log.clone(), source })?;
        let child = start(program, args, &file, &log)?;
        Ok(Self { name, log, child, program: program.to_owned(), args: args.to_vec() })
    }

    /// Kills the process and starts it again with the same command line, its output appended to the same log
    /// (chaos runs restart the API server this way).
    pub async fn restart(&mut self) -> Result<(), Error> {
        self.kill().await;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .map_err(|source| Error::Io { path: self.log.clone(), source })?;
        self.child = start(&self.program, &self.args, &file, &self.log)?;
        Ok(())
    }

    /// The process id, if still running.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// `Some(status)` if the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

const SETPRIV: &str = "/usr/bin/setpriv";

/// Starts `program args…` with stdout and stderr going to `file` (`log` names it in errors).
fn start(program: &Path, args: &[String], file: &std::fs::File, log: &Path) -> Result<Child, Error> {
    let err = file.try_clone().map_err(|source| Error::Io { path: log.to_owned(), source })?;
    let out = file.try_clone().map_err(|source| Error::Io { path: log.to_owned(), source })?;
    let mut cmd = if Path::new(SETPRIV).exists() {
        let mut c = Command::new(SETPRIV);
        c.arg("--pdeathsig").arg("SIGKILL").arg("--").arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
    cmd.spawn().map_err(|source| Error::Spawn { program: program.to_owned(), source })
}

/// The last `lines` lines of a log file, for failure reports.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
