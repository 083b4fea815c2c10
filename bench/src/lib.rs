//! Benchmark harness for Reloader-compatible controllers.
//!
//! It runs a controller binary as a child process against a Kubernetes API server (a local control plane it
//! starts with `testenv`, or any cluster given by a kubeconfig), plays upstream Reloader's load-test scenarios
//! (reloader-behaviour.md §11: S1–S13) plus a memory-scale scenario (M1), and measures everything from outside
//! the controller so every binary is measured the same way:
//!
//! - [`measure::actions`]: expected vs observed reloads, mapped update by update through the content hash;
//! - [`measure::tracker`]: the pod-template changes seen on a watch, with their arrival time (latency);
//! - [`measure::procfs`]: CPU seconds and RSS of the child from `/proc`;
//! - [`measure::audit`]: API requests by verb from the API server's audit log;
//! - [`report`]: markdown, JSON and SVG output and ours/baseline ratios.
//!
//! [`chaos`] (the `chaos` binary, `make chaos`) reuses the objects, the update driver and the controller process
//! handling to inject faults while updates run, and checks that no reload is missed or duplicated.

pub mod chaos;
pub mod cli;
pub mod controller;
pub mod env;
pub mod measure;
pub mod report;
pub mod scenarios;
pub mod soak;

use std::path::PathBuf;

/// Everything that can go wrong in a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Starting or using the local control plane failed.
    #[error("control plane: {0}")]
    Testenv(#[from] testenv::Error),
    /// An API call failed.
    #[error("kubernetes API ({what}): {source}")]
    Kube {
        /// What the call was for.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The controller under test could not be started.
    #[error("starting controller `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The controller under test exited while it should have been running.
    #[error("controller `{command}` exited early ({status}); its log: {log}")]
    ControllerExited {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its log file.
        log: PathBuf,
    },
    /// A wait ran out of time.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// A command-line value is invalid.
    #[error("invalid option: {0}")]
    Invalid(String),
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// Wraps a client error with what the call was for.
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube { what: what.into(), source }
    }
}
