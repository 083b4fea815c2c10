//! The observer's lists: a relist records what it sees and forgets the rest (the one way a workload leaves goes
//! through [`Observer::forget_workload`]); the first sync, once every stream has listed or failed, and every
//! relist after it queue every workload (level-triggered; an unchanged one costs no request).

use std::{
    collections::{HashMap, HashSet},
    time::Instant,
};

use tracing::{info, warn};

use super::{Lane, Observer};
use crate::{
    controller::{Observed, Source},
    index::ConfigKey,
    workload::WorkloadKey,
};

/// What a relist has seen so far (a stream fills the set of its own kind).
#[derive(Debug, Default)]
pub(super) struct ListSeen {
    pub(super) configs: HashSet<ConfigKey>,
    pub(super) workloads: HashSet<WorkloadKey>,
    pub(super) namespaces: HashSet<String>,
}

/// The relists in progress that record what they see, by stream.
#[derive(Debug, Default)]
pub(super) struct Relists(pub(super) HashMap<usize, ListSeen>);

impl Relists {
    /// The record of `stream`'s relist, when `listed` (the object is part of a list) and that list records.
    pub(super) fn seen(&mut self, stream: usize, listed: bool) -> Option<&mut ListSeen> {
        if listed { self.0.get_mut(&stream) } else { None }
    }
}

impl Observer {
    /// Stream `id` starts a list. Its first list (unless it failed before) records nothing: the index holds nothing
    /// of it yet. A stream that failed before may have left entries through the fallback LISTs: it records too.
    pub(super) fn list_started(&mut self, id: usize) {
        let first = self.lists_started.insert(id) && !self.errored.get(id).copied().unwrap_or(false);
        if !first {
            self.relisting.0.insert(id, ListSeen::default());
        }
    }

    /// After a (re)list: forget what the list no longer contains; after the first sync, and after every
    /// relist, reconcile all workloads (an unchanged one costs no request).
    pub(super) fn list_done(&mut self, id: usize) {
        if let Some(seen) = self.relisting.0.remove(&id) {
            self.prune(id, &seen);
        }
        self.listed[id] = true;
        if let Some(info) = self.infos.get(id) {
            self.ctx.health.source_listed(&info.to_string());
        }
        self.recovered(id);
        self.update_readiness();
        if let Some(info) = self.infos.get(id)
            && let Source::Config(kind) = info.source
        {
            self.ctx.index().set_config_source_listed(kind, info.namespace.as_deref(), true);
        }
        if !self.first_sync_if_complete() && self.synced {
            self.reconcile_all();
        }
    }

    /// Forgets what stream `id` covers and was not `seen` (in its last list).
    pub(super) fn prune(&mut self, id: usize, seen: &ListSeen) {
        let ListSeen { configs, workloads, namespaces } = seen;
        let Some(info) = self.infos.get(id) else { return };
        let ns = info.namespace.as_deref();
        let mut index = self.ctx.index();
        match info.source {
            Source::Config(kind) => {
                let tombstone = self.ctx.settings.reload_on_delete;
                for key in index.configs_of(kind, ns) {
                    if !configs.contains(&key) {
                        index.delete_config(&key, tombstone);
                    }
                }
            }
            Source::Workload(kind) => {
                let gone: Vec<WorkloadKey> =
                    index.workloads_of(kind, ns).into_iter().filter(|k| !workloads.contains(k)).collect();
                drop(index);
                let now = Instant::now();
                for key in gone {
                    self.forget_workload(&key, now);
                }
            }
            Source::Namespaces => self.selected.retain(|n| namespaces.contains(n)),
            Source::NamespaceAnnotations => {
                index.retain_namespaces(namespaces);
                // A namespace gone while the watch was away takes its reported bad values along.
                self.bad_namespace_values.retain(|(n, _), _| namespaces.contains(n));
            }
            Source::SecretProviderClasses => {}
        }
    }

    /// Synced once every core stream has listed or failed and every core kind has listed in one of its
    /// namespaces at least: reloads can happen. An optional kind (Rollouts, DeploymentConfigs, CSI) still listing
    /// does not hold it back, nor does a namespace that may not be watched (degraded, named in `/readyz`: issue 38,
    /// finding 5). From then on `/readyz` says whether each core kind is still served somewhere (http.rs), and
    /// `reloader_ready` follows it at every list, failure and recovery.
    pub(super) fn update_readiness(&self) {
        let core =
            || self.infos.iter().zip(self.listed.iter().zip(&self.errored)).filter(|(i, _)| !i.source.is_optional());
        let listed_kinds: HashSet<&str> =
            core().filter(|(_, (l, _))| **l).map(|(i, _)| i.source.api_resource()).collect();
        let settled = core().all(|(_, (l, e))| *l || *e);
        if settled && core().all(|(i, _)| listed_kinds.contains(i.source.api_resource())) {
            self.ctx.health.set_synced();
        }
        let ready = self.ctx.health.readiness(Instant::now()).is_ok();
        self.ctx.metrics.ready.set(if ready { 1.0 } else { 0.0 });
    }

    /// The first sync: once every stream has listed or failed (a stream that cannot list never holds the others
    /// back), reconcile every workload once. Returns true when it happened now.
    pub(super) fn first_sync_if_complete(&mut self) -> bool {
        if self.synced || !self.listed.iter().zip(&self.errored).all(|(l, e)| *l || *e) {
            return false;
        }
        self.synced = true;
        let (configs, workloads) = self.ctx.index().sizes();
        let failing: Vec<String> =
            self.infos.iter().zip(&self.listed).filter(|(_, l)| !**l).map(|(i, _)| i.to_string()).collect();
        if failing.is_empty() {
            info!(configs, workloads, "all watches synced; reconciling every workload once");
        } else {
            warn!(configs, workloads, failing = ?failing,
                  "watches synced except {failing:?}, which keep retrying; reconciling every workload once");
        }
        self.reconcile_all();
        true
    }

    /// The one way a workload leaves, however it goes (deleted, missing from a relist or a fallback LIST): the
    /// index, the rollout budget's slot and the gates' waiting entry forget it, and what waited for it is woken.
    /// A budget slot left behind was held until `--rollout-timeout` and then read as a failed rollout (issue 27,
    /// finding 6).
    pub(super) fn forget_workload(&self, key: &WorkloadKey, now: Instant) {
        self.ctx.index().delete_workload(key);
        self.ctx.waiting.forget(key, &self.ctx.metrics.waiting);
        self.ctx.pod_restarts.forget(key, &self.ctx.metrics.pod_restarts_stalled);
        for waiter in self.ctx.waiting.to_wake(now, Some(key)) {
            self.enqueue(waiter, now, Lane::Change);
        }
        if let Some(next) = self.ctx.budget.forget(key) {
            self.enqueue(next, now, Lane::Change);
        }
    }

    /// Queues every workload (after a sync, a relist, or on becoming leader); unchanged ones cost no request.
    pub(in crate::controller) fn reconcile_all(&self) {
        if !self.synced {
            return;
        }
        let now = Instant::now();
        let keys = {
            let index = self.ctx.index();
            if self.ctx.leads() {
                // Rollouts running now count in the budget, whoever started them (a leader before this one).
                self.ctx.budget.adopt(index.rollouts_in_progress(), now);
            }
            index.workload_keys()
        };
        for key in keys {
            self.enqueue(key, now, Lane::Reconcile);
        }
        if self.ctx.owed_jobs.enabled() && self.ctx.leads() {
            // Jobs an earlier process deleted for a reload (and maybe did not create again): their reconcile settles
            // the entry. Back through the observer, which queues only those in scope (issue 38, finding 7: the
            // Secret is shared by every controller of its namespace, whatever namespaces each watches).
            let (ctx, tx) = (self.ctx.clone(), self.fallback_tx.clone());
            tokio::spawn(async move {
                let keys = ctx.owed_jobs.owed_keys(&ctx.client).await;
                if !keys.is_empty() {
                    let _ = tx.unbounded_send(Observed::OwedJobs(keys));
                }
            });
        }
    }
}
