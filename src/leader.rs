//! Leader election for `--enable-ha` on a coordination.k8s.io/v1 Lease (upstream v1: `stakater-reloader-lock`
//! in `POD_NAMESPACE`, identity `POD_NAME`), with client-go's semantics and upstream's RBAC (`get`, `create`,
//! `update` on leases — no `patch`):
//!
//! - a candidate takes the Lease only when it is free or its holder has not renewed it for a lease duration,
//!   measured on this replica's own clock from when it last saw the record change (no trust in other clocks);
//! - every write is an update carrying the `resourceVersion` it read, so two candidates cannot both win;
//! - the leader renews every retry period, and **steps down once it has not renewed for the renew deadline**
//!   (an API server that stops answering included): the renew deadline is shorter than the lease duration,
//!   so it stops writing before anyone else can take over;
//! - on shutdown the leader hands the Lease back (`--leader-election-release-on-cancel`), so a successor does
//!   not wait for it to expire.
//!
//! Sharing upstream's Lease name means upstream and this controller exclude each other during a migration.
//! Every replica keeps its watches and index warm; only the leader's workers write.
//!
//! The election runs on a thread of its own, with its own runtime and client: the controller's runtime is one
//! thread, and an initial list of thousands of objects, or a named-list plan, kept it busy past the renew
//! deadline, so a healthy leader stepped down (and exited) under load (issue 27, finding 0). A client's
//! connection and request tasks live on the runtime that made it, hence the second client.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::LeaderElection;

/// Whether this replica may write, as a watch channel.
pub struct Leadership {
    /// `true` while this replica leads (always, without HA).
    pub is_leader: watch::Receiver<bool>,
    /// Keeps the fixed channel open when HA is off.
    _always: Option<watch::Sender<bool>>,
    /// Stops the election loop (which then releases the Lease if it holds it); the second half says it ended.
    stop: Option<(CancellationToken, oneshot::Receiver<()>)>,
}

impl Leadership {
    /// Without HA: always the leader.
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Self { is_leader: rx, _always: Some(tx), stop: None }
    }

    /// Starts competing for the lease on a thread of its own, with the client `client` builds there. A client
    /// that cannot be built is logged and ends the election: `is_leader`'s sender is dropped, which stops the
    /// controller.
    pub fn elect<F>(client: F, cfg: &LeaderElection) -> Self
    where
        F: Future<Output = Result<Client, kube::Error>> + Send + 'static,
    {
        let (tx, rx) = watch::channel(false);
        let (cancel, (ended, ended_rx)) = (CancellationToken::new(), oneshot::channel());
        let (token, cfg) = (cancel.clone(), cfg.clone());
        let election = move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            match runtime {
                Ok(runtime) => runtime.block_on(async move {
                    match client.await {
                        Ok(client) => {
                            let api = Api::namespaced(client, &cfg.namespace);
                            Elector { api, cfg, observed: None }.run(tx, token).await;
                        }
                        Err(e) => tracing::error!("leader election cannot start: building its client: {e}"),
                    }
                }),
                Err(e) => tracing::error!("leader election cannot start: {e}"),
            }
            let _ = ended.send(());
        };
        if let Err(e) = std::thread::Builder::new().name("leader-election".into()).spawn(election) {
            tracing::error!("leader election cannot start: {e}");
        }
        Self { is_leader: rx, _always: None, stop: Some((cancel, ended_rx)) }
    }

    /// Stops competing; the Lease is released if held (and `--leader-election-release-on-cancel`).
    pub async fn release(self) {
        if let Some((cancel, ended)) = self.stop {
            cancel.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(5), ended).await;
        }
    }
}

/// The Lease record as last seen, and when this replica saw it change.
struct Observed {
    holder: String,
    renew_time: Option<MicroTime>,
    lease_seconds: i32,
    at: Instant,
}

struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    observed: Option<Observed>,
}

/// The outcome of one attempt.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the Lease (acquired or renewed).
    Held,
    /// Someone else holds it, or another candidate won the race.
    Other(String),
}

impl Elector {
    async fn run(mut self, tx: watch::Sender<bool>, cancel: CancellationToken) {
        let mut last_renew: Option<Instant> = None;
        loop {
            let leading = *tx.borrow();
            // A leader's attempt must end in time to step down at the renew deadline.
            let budget = match last_renew.filter(|_| leading) {
                Some(at) => self.cfg.renew_deadline.saturating_sub(at.elapsed()).min(self.cfg.retry_period),
                None => self.cfg.retry_period,
            };
            let started = Instant::now();
            let attempt = tokio::select! {
                () = cancel.cancelled() => break,
                r = tokio::time::timeout(budget.max(Duration::from_millis(100)), self.try_acquire_or_renew()) => r,
            };
            match attempt {
                Ok(Ok(Attempt::Held)) => {
                    last_renew = Some(started);
                    if !leading {
                        info!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, "became leader");
                        tx.send_replace(true);
                    }
                }
                Ok(Ok(Attempt::Other(holder))) => {
                    if leading {
                        warn!(lease = %self.cfg.lease_name, %holder, "the lease is held by another replica: stepping down");
                        tx.send_replace(false);
                    }
                }
                Ok(Err(e)) => debug!(lease = %self.cfg.lease_name, "leader election: {e}"),
                Err(_) => {
                    debug!(lease = %self.cfg.lease_name, "leader election: the API server did not answer in time")
                }
            }
            if *tx.borrow() && last_renew.is_none_or(|at| at.elapsed() >= self.cfg.renew_deadline) {
                warn!(lease = %self.cfg.lease_name, deadline = ?self.cfg.renew_deadline,
                      "could not renew the lease within the renew deadline: stepping down");
                tx.send_replace(false);
            }
            let pause = self.cfg.retry_period.saturating_sub(started.elapsed());
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        if *tx.borrow() {
            tx.send_replace(false);
            if self.cfg.release_on_cancel {
                match tokio::time::timeout(Duration::from_secs(3), self.release()).await {
                    Ok(Ok(())) => info!(lease = %self.cfg.lease_name, "released the lease"),
                    Ok(Err(e)) => warn!(lease = %self.cfg.lease_name, "releasing the lease: {e}"),
                    Err(_) => warn!(lease = %self.cfg.lease_name, "releasing the lease timed out"),
                }
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: GET, then CREATE or UPDATE with the version read.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let me = self.cfg.identity.clone();
        let lease_seconds = i32::try_from(self.cfg.lease_seconds).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.cfg.lease_name).await? else {
            let spec = LeaseSpec {
                holder_identity: Some(me),
                lease_duration_seconds: Some(lease_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            };
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.cfg.lease_name.clone()), ..ObjectMeta::default() },
                spec: Some(spec),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => Ok(self.observe(&created, true)),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Other("(just created)".into())),
                Err(e) => Err(e),
            };
        };
        let held = self.observe(&lease, false);
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if let Attempt::Other(holder) = held
            && !holder.is_empty()
            && !self.expired()
        {
            return Ok(Attempt::Other(holder));
        }
        if holder != me {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.holder_identity = Some(me);
        spec.lease_duration_seconds = Some(lease_seconds);
        spec.renew_time = Some(now);
        // `replace` sends the resourceVersion read above: a concurrent writer makes this fail with 409. When the
        // record read names this replica, the other writer was most likely its own earlier renewal that the API
        // server applied after the client gave up waiting for it (a loaded server): a failed renewal like any
        // other, not a sign that someone else leads — the renew deadline decides (client-go's renew loop). It
        // stepped down at once, and a test's controller under load exited before publishing its Events.
        match self.api.replace(&self.cfg.lease_name, &PostParams::default(), &lease).await {
            Ok(updated) => Ok(self.observe(&updated, true)),
            Err(kube::Error::Api(s)) if s.code == 409 && holder != self.cfg.identity => Ok(Attempt::Other(holder)),
            Err(e) => Err(e),
        }
    }

    /// Records the Lease as seen now (its observation time moves only when the record changed, or when we
    /// wrote it) and says who holds it.
    fn observe(&mut self, lease: &Lease, written: bool) -> Attempt {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        let lease_seconds = spec.lease_duration_seconds.unwrap_or(0);
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time || o.lease_seconds != lease_seconds);
        if changed || written {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew_time: spec.renew_time,
                lease_seconds,
                at: Instant::now(),
            });
        }
        if holder == self.cfg.identity { Attempt::Held } else { Attempt::Other(holder) }
    }

    /// The observed holder has not renewed for its lease duration (by our clock).
    fn expired(&self) -> bool {
        self.observed.as_ref().is_none_or(|o| {
            let duration = Duration::from_secs(u64::try_from(o.lease_seconds.max(1)).unwrap_or(1));
            o.at.elapsed() > duration
        })
    }

    /// Hands the Lease back (client-go's `ReleaseOnCancel`): no holder, a one-second duration.
    async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.cfg.lease_name).await? else { return Ok(()) };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        self.api.replace(&self.cfg.lease_name, &PostParams::default(), &lease).await.map(|_| ())
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
