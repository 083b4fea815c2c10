//! Chaos runs (RELIABILITY.md): a burst of ConfigMap and Secret updates over many Deployments while one fault
//! is injected, then a check that every Deployment converged on the final content of what it uses, that no
//! rollout was duplicated, and that nothing rolls once the controller has converged.
//!
//! - [`layout`]: namespaces, resources, Deployments (and Argo Rollouts for fault 4);
//! - [`observe`]: the runner's own watch of every pod-template write, with its time;
//! - [`analysis`]: missed, duplicate and spurious rollouts from those writes (pure, unit-tested);
//! - [`controllers`]: the controller processes (one, or three HA replicas), killed and restarted at will;
//! - [`plane`]: the control plane (signals to its processes, etcd compaction, API-server restart);
//! - [`faults`], [`api_faults`], [`writer`]: what each fault does during the burst;
//! - [`run`]: one fault with one reload strategy, end to end ([`settle`]: convergence and the final read);
//!   [`report`]: the tables.

pub mod analysis;
pub mod api_faults;
pub mod controllers;
pub mod faults;
pub mod layout;
pub mod observe;
pub mod plane;
pub mod pod_restarts;
pub mod report;
pub mod run;
pub mod settle;
pub mod writer;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Error;

/// A fault, numbered as in RELIABILITY.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Fault {
    /// 1: the controller is SIGKILLed at random moments of the burst and restarted each time.
    ControllerKill,
    /// 2: kube-apiserver is stopped (SIGSTOP) for a while during the burst, then resumed (SIGCONT).
    ApiserverStop,
    /// 3: etcd compacted to its current revision while the controller is stopped and the API server restarts:
    /// the controller's re-watch gets 410 Gone.
    EtcdCompaction,
    /// 4: the Argo Rollouts CRD is deleted and re-created while the controller runs with `--is-Argo-Rollouts`.
    CrdRecreate,
    /// 5: `--namespaces a,b,c` with a ServiceAccount bound to a Role per namespace; one Role is removed, then
    /// restored.
    RoleRemoved,
    /// 6: three `--enable-ha` replicas; the leader is SIGKILLed (twice) and restarted.
    LeaderKill,
    /// 7: a concurrent writer replaces every Deployment with stale `resourceVersion`s (409 Conflict) and patches
    /// their metadata in a tight loop.
    ConflictingWriter,
    /// 8: a kind added by configuration (Kruise CloneSets, `--workload-kind=kruise-cloneset`, the project's real
    /// CRD) and `evict-pods` Deployments beside the others, the controller SIGKILLed at random moments as in
    /// fault 1.
    ConfiguredKind,
    /// 9: pod restarts while their owner's controller does not answer: `evict-pods` Deployments and a
    /// `delete-pods` DaemonSet, kube-controller-manager SIGSTOPped mid-restart (no replacement pod is created),
    /// then SIGCONT. Never more than one pod of a workload down, none missed.
    OwnerStopped,
}

/// Every fault, in run order.
pub const ALL_FAULTS: [Fault; 9] = [
    Fault::ControllerKill,
    Fault::ApiserverStop,
    Fault::EtcdCompaction,
    Fault::CrdRecreate,
    Fault::RoleRemoved,
    Fault::LeaderKill,
    Fault::ConflictingWriter,
    Fault::ConfiguredKind,
    Fault::OwnerStopped,
];

impl Fault {
    /// Its number (1–9).
    pub fn number(self) -> usize {
        ALL_FAULTS.iter().position(|f| *f == self).map_or(0, |i| i + 1)
    }

    /// One line saying what it does.
    pub fn title(self) -> &'static str {
        match self {
            Self::ControllerKill => "controller SIGKILLed at random moments, restarted",
            Self::ApiserverStop => "kube-apiserver SIGSTOPped, then SIGCONT",
            Self::EtcdCompaction => "etcd compacted + API server restarted: re-watch gets 410 Gone",
            Self::CrdRecreate => "Argo Rollouts CRD deleted and re-created",
            Self::RoleRemoved => "one namespace's Role removed, then restored",
            Self::LeaderKill => "HA leader SIGKILLed among 3 replicas",
            Self::ConflictingWriter => "concurrent writer on the Deployments (409 Conflicts)",
            Self::ConfiguredKind => "a configured kind and evict-pods, controller SIGKILLed, restarted",
            Self::OwnerStopped => "pod restarts with kube-controller-manager SIGSTOPped, then SIGCONT",
        }
    }

    /// Whether it needs the local control plane (signals to its processes, etcd).
    pub fn needs_local_plane(self) -> bool {
        matches!(self, Self::ApiserverStop | Self::EtcdCompaction | Self::OwnerStopped)
    }

    /// Parses `all` or a comma list of numbers (`1,7`).
    pub fn parse_list(text: &str) -> Result<Vec<Self>, Error> {
        if text.trim().eq_ignore_ascii_case("all") {
            return Ok(ALL_FAULTS.to_vec());
        }
        let one = |t: &str| {
            let n: usize = t.trim().parse().map_err(|_| Error::Invalid(format!("fault {t} (use 1–9 or all)")))?;
            ALL_FAULTS.get(n.wrapping_sub(1)).copied().ok_or_else(|| Error::Invalid(format!("fault {n} (use 1–9)")))
        };
        text.split(',').filter(|t| !t.trim().is_empty()).map(one).collect()
    }
}

/// The controller's `--reload-strategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Strategy {
    /// `STAKATER_<NAME>_<KIND>` env vars on the containers.
    EnvVars,
    /// The `reloader.stakater.com/last-reloaded-from` pod-template annotation.
    Annotations,
}

impl Strategy {
    /// The flag value.
    pub fn flag(self) -> &'static str {
        match self {
            Self::EnvVars => "env-vars",
            Self::Annotations => "annotations",
        }
    }

    /// Parses a comma list of flag values.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, Error> {
        let one = |t: &str| match t.trim() {
            "env-vars" => Ok(Self::EnvVars),
            "annotations" => Ok(Self::Annotations),
            other => Err(Error::Invalid(format!("strategy {other} (use env-vars or annotations)"))),
        };
        text.split(',').filter(|t| !t.trim().is_empty()).map(one).collect()
    }
}

/// Sizes and timings of a chaos run.
#[derive(Clone, Debug)]
pub struct ChaosOptions {
    /// How long random updates are made (fault 2 makes them for at least its stop plus 10 s).
    pub burst: Duration,
    /// How long template writes are watched for once every workload has converged (spurious rollouts).
    pub quiet: Duration,
    /// Longest wait after the burst for every workload to carry the final content hash.
    pub converge_timeout: Duration,
    /// Namespaces (the controller runs with `--namespaces` listing them).
    pub namespaces: usize,
    /// ConfigMaps per namespace.
    pub configmaps_per_ns: usize,
    /// Secrets per namespace.
    pub secrets_per_ns: usize,
    /// Deployments using each resource.
    pub workloads_per_resource: usize,
    /// Each update task changes a random resource this often.
    pub update_interval: Duration,
    /// Concurrent update tasks.
    pub update_tasks: usize,
    /// Seed of the fault timings (kill moments, restart delays).
    pub seed: u64,
    /// SIGKILLs of fault 1.
    pub kills: usize,
    /// How long fault 2 keeps the API server stopped.
    pub apiserver_stop: Duration,
}

impl Default for ChaosOptions {
    /// The `make chaos` sizes: 3 namespaces × (3 ConfigMaps + 2 Secrets) × 2 Deployments each = 30 Deployments,
    /// about 5 updates a second for 25 s, a 20 s quiet period.
    fn default() -> Self {
        Self {
            burst: Duration::from_secs(25),
            quiet: Duration::from_secs(20),
            converge_timeout: Duration::from_secs(60),
            namespaces: 3,
            configmaps_per_ns: 3,
            secrets_per_ns: 2,
            workloads_per_resource: 2,
            update_interval: Duration::from_millis(400),
            update_tasks: 2,
            seed: 0x5eed_c4a05,
            kills: 3,
            apiserver_stop: Duration::from_secs(30),
        }
    }
}

/// xorshift64: reproducible fault timings without a dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator; a zero seed (xorshift's fixed point) is replaced.
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 { 0x2545_F491_4F6C_DD1D } else { seed })
    }

    /// A duration uniformly in `[low, high)` (ms resolution); `low` when the range is empty.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        let span = high.saturating_sub(low).as_millis() as u64;
        if span == 0 { low } else { low + Duration::from_millis(x % span) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lists_parse() {
        assert_eq!(Fault::parse_list("all").map(|v| v.len()).ok(), Some(9));
        assert_eq!(Fault::parse_list("1, 7").ok(), Some(vec![Fault::ControllerKill, Fault::ConflictingWriter]));
        assert_eq!(Fault::parse_list("8").ok(), Some(vec![Fault::ConfiguredKind]));
        assert!(Fault::parse_list("0").is_err());
        assert_eq!(Fault::parse_list("9").ok(), Some(vec![Fault::OwnerStopped]));
        assert!(Fault::parse_list("10").is_err());
        assert!(Fault::parse_list("x").is_err());
        assert_eq!(Fault::LeaderKill.number(), 6);
        assert_eq!(
            Strategy::parse_list("env-vars,annotations").ok(),
            Some(vec![Strategy::EnvVars, Strategy::Annotations])
        );
        assert!(Strategy::parse_list("envvars").is_err());
    }

    #[test]
    fn rng_is_reproducible_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            let x = a.between(Duration::from_secs(1), Duration::from_secs(3));
            assert_eq!(x, b.between(Duration::from_secs(1), Duration::from_secs(3)));
            assert!(x >= Duration::from_secs(1) && x < Duration::from_secs(3));
        }
        assert_eq!(Rng::new(0).between(Duration::from_secs(2), Duration::from_secs(1)), Duration::from_secs(2));
    }
}
