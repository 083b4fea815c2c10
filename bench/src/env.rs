//! Where the benchmark runs: a local control plane it starts itself (with an audit log and a dedicated
//! controller user), or an existing cluster from a kubeconfig (no audit log: API counts are unavailable).

use std::{path::PathBuf, time::Duration};

use kube::Client;
use testenv::cluster::{ControlPlane, Options};

use crate::{Error, measure::audit};

/// User name of the controller under test in the local control plane.
pub const CONTROLLER_USER: &str = "reloader-bench";

/// Control-plane components that only react to rollouts (see [`BenchEnv::local`]).
const REACTORS: [&str; 3] = ["kube-controller-manager", "kube-scheduler", "kwok"];

/// kube-controller-manager's controllers minus those that roll Deployments, StatefulSets and DaemonSets out.
const ROLLOUTS_OFF: &str =
    "--controllers=*,-deployment-controller,-replicaset-controller,-statefulset-controller,-daemonset-controller";

/// How to start the local control plane.
pub struct LocalPlane {
    /// KWOK fake nodes.
    pub nodes: usize,
    /// Run the [`REACTORS`] at nice 10.
    pub renice_reactors: bool,
    /// Extra kube-apiserver flags (after the bench's own, so they win).
    pub apiserver_args: Vec<String>,
    /// Whether kube-controller-manager runs the controllers that turn template writes into ReplicaSets and
    /// pods (off: only the controller under test's writes load the API server).
    pub rollouts: bool,
}

/// Runs the components that only react to rollouts (kube-controller-manager creating ReplicaSets and pods,
/// kube-scheduler, KWOK) at nice 10: on a 2-core machine their work after each reload otherwise competes with
/// the API server and the controller under test for the same cores.
pub fn renice_reactors(plane: &ControlPlane) {
    for (name, pid) in plane.pids().into_iter().filter(|(n, _)| REACTORS.contains(n)) {
        let ok = std::process::Command::new("renice")
            .args(["-n", "10", "-p", &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        tracing::info!(component = name, pid, ok, "renice -n 10");
    }
}

/// The cluster and how the controller reaches it.
pub struct BenchEnv {
    /// Admin client for the bench's own requests.
    pub client: Client,
    /// Kubeconfig handed to the controller.
    pub controller_kubeconfig: PathBuf,
    /// The audit log and the user to count, when the bench started the control plane.
    pub audit: Option<(PathBuf, String)>,
    /// Where results and logs go.
    pub out_dir: PathBuf,
    plane: Option<ControlPlane>,
}

impl BenchEnv {
    /// Starts a local control plane in `<target>/testenv/bench` with an audit policy that logs only the
    /// controller's user, and mints that user's kubeconfig (`system:masters`, like a cluster-wide install).
    ///
    /// With `local.renice_reactors`, the components that only react to rollouts (kube-controller-manager creating
    /// ReplicaSets and pods, kube-scheduler, KWOK) run at nice 10: on a 2-core machine their work after each
    /// reload otherwise competes with the API server and the controller under test for the same cores, which
    /// a real cluster's separate control-plane nodes would not.
    pub async fn local(target_dir: PathBuf, out_dir: PathBuf, local: &LocalPlane) -> Result<Self, Error> {
        let bin_dir = testenv::binaries::ensure_built()?;
        let state_dir = target_dir.join("testenv").join("bench");
        let policy_dir = target_dir.join("bench-audit");
        std::fs::create_dir_all(&policy_dir).map_err(|source| Error::Io { path: policy_dir.clone(), source })?;
        let policy = policy_dir.join("policy.yaml");
        std::fs::write(&policy, audit::policy(CONTROLLER_USER))
            .map_err(|source| Error::Io { path: policy.clone(), source })?;
        let audit_log = state_dir.join("logs").join("audit.log");
        let plane = ControlPlane::start(&Options {
            bin_dir,
            state_dir: state_dir.clone(),
            nodes: local.nodes,
            ready_timeout: Duration::from_secs(120),
            extra_apiserver_args: vec![
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", audit_log.display()),
                "--audit-log-format=json".into(),
                // Blocking writes keep every event; the policy makes them rare.
                "--audit-log-mode=blocking".into(),
            ]
            .into_iter()
            .chain(local.apiserver_args.iter().cloned())
            .collect(),
            extra_controller_manager_args: if local.rollouts { Vec::new() } else { vec![ROLLOUTS_OFF.into()] },
        })
        .await?;
        let controller_kubeconfig = state_dir.join("controller.kubeconfig");
        plane.write_user_kubeconfig(&controller_kubeconfig, CONTROLLER_USER, &["system:masters"])?;
        let client = plane.client().await?;
        if local.renice_reactors {
            renice_reactors(&plane);
        }
        Ok(Self {
            client,
            controller_kubeconfig,
            audit: Some((audit_log, CONTROLLER_USER.into())),
            out_dir,
            plane: Some(plane),
        })
    }

    /// Uses an existing cluster; the controller gets the same kubeconfig.
    pub async fn external(kubeconfig: PathBuf, out_dir: PathBuf) -> Result<Self, Error> {
        let client = testenv::cluster::client_from_kubeconfig(&kubeconfig).await?;
        Ok(Self { client, controller_kubeconfig: kubeconfig, audit: None, out_dir, plane: None })
    }

    /// Process ids of the local control plane's components (for the report's machine notes).
    pub fn plane_pids(&self) -> Vec<(&'static str, u32)> {
        self.plane.as_ref().map(ControlPlane::pids).unwrap_or_default()
    }

    /// Stops the local control plane, if any.
    pub async fn stop(&mut self) {
        if let Some(mut p) = self.plane.take() {
            p.stop().await;
        }
    }
}
