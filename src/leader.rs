//! Leader election for `--enable-ha` on a coordination.k8s.io/v1 Lease (upstream v1: `stakater-reloader-lock`
//! in `POD_NAMESPACE`, identity `POD_NAME`). kube-lease-manager acquires and renews with server-side apply
//! without force, so a concurrent claim conflicts instead of producing two leaders. Every replica keeps its
//! watches and index warm; only the leader's workers write. The lease is released on shutdown.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::{sync::watch, task::JoinHandle};

use crate::config::LeaderElection;

/// Whether this replica may write, as a watch channel.
pub struct Leadership {
    /// `true` while this replica leads (always, without HA).
    pub is_leader: watch::Receiver<bool>,
    /// Keeps the fixed channel open when HA is off.
    _always: Option<watch::Sender<bool>>,
    task: Option<JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>>,
}

impl Leadership {
    /// Without HA: always the leader.
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Self { is_leader: rx, _always: Some(tx), task: None }
    }

    /// Starts competing for the lease.
    pub async fn elect(client: Client, cfg: &LeaderElection) -> Result<Self, LeaseManagerError> {
        // Renew this long before expiry: the lease duration minus the renew deadline (upstream 15s − 10s).
        // The manager requires grace < duration.
        let grace =
            cfg.lease_seconds.saturating_sub(cfg.renew_deadline.as_secs()).min(cfg.lease_seconds.saturating_sub(1));
        let manager = LeaseManagerBuilder::new(client, &cfg.lease_name)
            .with_namespace(&cfg.namespace)
            .with_identity(&cfg.identity)
            .with_duration(cfg.lease_seconds)
            .with_grace(grace)
            .build()
            .await?;
        let (rx, task) = manager.watch().await;
        Ok(Self { is_leader: rx, _always: None, task: Some(task) })
    }

    /// Releases the lease (if held) and waits briefly for that to happen.
    pub async fn release(self) {
        let Self { is_leader, task, .. } = self;
        drop(is_leader);
        if let Some(task) = task {
            // Dropping every receiver makes the manager release its lock and end.
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}
