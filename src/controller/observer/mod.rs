//! The observer: applies watch observations to the index and queues the workloads that must be reconciled:
//! those a content change concerns and changed workloads. This module holds the [`Observer`] and its core (its
//! streams, the scope, the work queue's lanes, applying one observation); each submodule holds one topic of its
//! impl and the types that topic needs: lists, relists and the first sync (`lists.rs`), triggers (`trigger.rs`),
//! failures (`failures.rs`), kinds listed instead of watched (`fallback.rs`), what the pods of kinds without a pod
//! template use (`pod_uses.rs`), CSI (`csi.rs`), namespaces' annotations (`namespaces.rs`). The rest of the
//! controller reaches them only through this module.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Instant,
};

use tracing::{debug, info, warn};

use super::{Context, Observed, Source, StreamInfo};
use crate::rules::resource::ConfigKind;
use crate::{
    config::WatchScope,
    index::{Baseline, ConfigUpdate},
    workload::WorkloadKey,
};
use lists::Relists;

mod csi;
mod failures;
mod fallback;
mod lists;
mod namespaces;
mod pod_uses;
mod trigger;

pub(super) use pod_uses::PodReads;

/// Applies observations to the index and queues work.
pub(super) struct Observer {
    ctx: Arc<Context>,
    infos: Vec<StreamInfo>,
    /// Per stream: its first list has completed.
    listed: Vec<bool>,
    /// Per stream: its last outcome was an error (cleared when it delivers again).
    errored: Vec<bool>,
    /// Streams that have started a list. The first list of a stream (unless it failed before) records nothing:
    /// the index holds nothing of the stream yet, so nothing can be gone — which spares a set of every key listed
    /// at startup (1.6 MB for M1's 20,000 resources, heaptrack). A relist records what it sees, to forget the rest.
    lists_started: HashSet<usize>,
    /// What each stream's current relist has seen so far.
    relisting: Relists,
    /// Namespaces matching `--namespace-selector` (only consulted when it is set).
    selected: HashSet<String>,
    /// Every stream has listed once or failed: changes are acted on from now on.
    synced: bool,
    /// CSI: each SecretProviderClassPodStatus's last hash.
    csi: crate::rules::csi::CsiTracker,
    /// CSI: `ignore`/`match` of each SecretProviderClass, by (namespace, name).
    csi_flags: HashMap<(String, String), (bool, bool)>,
    /// (namespace, annotation) whose value was reported as invalid, with that value (reported once per value).
    bad_namespace_values: HashMap<(String, String), String>,
    /// Workload streams that may not watch: their kind is listed on each change (fallback.rs).
    fallback: HashSet<usize>,
    /// Where fallback LISTs report back.
    fallback_tx: futures::channel::mpsc::UnboundedSender<Observed>,
    fallback_rx: Option<futures::channel::mpsc::UnboundedReceiver<Observed>>,
}

/// How a workload key enters the work queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// A change of the workload itself: at once.
    Change,
    /// A change of a resource it uses: once changes have been quiet (`--coalesce-quiet`, capped by the window).
    CoalescedChange,
    /// The full reconcile after a (re)list: behind every change (queue.rs, background lane).
    Reconcile,
}
impl Observer {
    pub(super) fn new(ctx: Arc<Context>, infos: Vec<StreamInfo>) -> Self {
        let listed = vec![false; infos.len()];
        let errored = vec![false; infos.len()];
        let (fallback_tx, fallback_rx) = fallback::channel();
        let observer = Self {
            ctx,
            infos,
            listed,
            errored,
            lists_started: HashSet::new(),
            relisting: Relists::default(),
            selected: HashSet::new(),
            synced: false,
            csi: crate::rules::csi::CsiTracker::default(),
            csi_flags: HashMap::new(),
            bad_namespace_values: HashMap::new(),
            fallback: HashSet::new(),
            fallback_tx,
            fallback_rx: Some(fallback_rx),
        };
        for info in &observer.infos {
            observer.register(info);
        }
        observer
    }

    /// Tells the index that a resource stream has not listed yet (plans keep the records of its kind), and
    /// starts its restart counter at 0 (metrics.rs says why).
    fn register(&self, info: &StreamInfo) {
        self.ctx.metrics.watch_restarts.with_label_values(&[info.source.api_resource()]);
        let (kind, core) = (info.source.api_resource(), !info.source.is_optional());
        self.ctx.health.register_source(&info.to_string(), kind, core);
        if let Source::Config(kind) = info.source {
            self.ctx.index().set_config_source_listed(kind, info.namespace.as_deref(), false);
        }
    }

    /// Observations made outside the watches (fallback LISTs), to merge with them (once).
    pub(super) fn take_fallback_stream(&mut self) -> Option<futures::channel::mpsc::UnboundedReceiver<Observed>> {
        self.fallback_rx.take()
    }

    /// The streams observed so far.
    pub(super) fn infos(&self) -> &[StreamInfo] {
        &self.infos
    }

    /// Registers a stream added after startup (an optional kind whose API appeared).
    pub(super) fn add_stream(&mut self, info: StreamInfo) {
        self.register(&info);
        self.infos.push(info);
        self.listed.push(false);
        self.errored.push(false);
    }

    /// Whether changes in `namespace` are acted on (`--namespaces`, `--namespaces-to-ignore`,
    /// `--namespace-selector`). The watches see only `--namespaces`; keys from elsewhere (owed Job recreations
    /// read from a Secret other controllers share) are checked against it too.
    fn active(&self, namespace: &str) -> bool {
        let s = &self.ctx.settings;
        let watched = match &s.watch.scope {
            WatchScope::All => true,
            WatchScope::Namespaces(list) => list.iter().any(|n| n == namespace),
        };
        watched
            && !s.namespaces_to_ignore.iter().any(|n| n == namespace)
            && (s.watch.namespace_selector.is_none() || self.selected.contains(namespace))
    }

    /// Baseline for objects first seen now on `stream`: in that stream's first list only
    /// `--sync-after-restart` makes unrecorded pairs stale; afterwards only `--reload-on-create` does (for
    /// resources, not workloads). Per stream, so a source that lists late (it was failing) starts the same way.
    fn baseline(&self, stream: usize, for_resource: bool) -> Baseline {
        let s = &self.ctx.settings;
        let first_list = !self.listed.get(stream).copied().unwrap_or(true);
        let stale = if first_list { s.sync_after_restart } else { for_resource && s.reload_on_create };
        if stale { Baseline::Stale } else { Baseline::Current }
    }

    fn enqueue(&self, key: WorkloadKey, at: Instant, lane: Lane) {
        let m = &self.ctx.metrics;
        if !self.active(&key.namespace) {
            // A skipped change is counted (upstream's reason); a skipped full-reconcile key is not a change.
            if lane != Lane::Reconcile {
                m.skipped.with_label_values(&["ignored_or_not_selected"]).inc();
            }
            return;
        }
        m.queue_adds.inc();
        match lane {
            Lane::Change => self.ctx.queue.add(key, at),
            Lane::CoalescedChange => {
                let s = &self.ctx.settings;
                self.ctx.queue.add_coalesced(key, at, s.coalesce_quiet, s.coalesce_window)
            }
            Lane::Reconcile => self.ctx.queue.add_background(key, at),
        }
        m.queue_depth.set(i64::try_from(self.ctx.queue.len()).unwrap_or(i64::MAX));
    }

    fn received(&self, event: &str, stream: usize) {
        let resource = match self.infos.get(stream).map(|i| i.source) {
            Some(Source::Config(ConfigKind::ConfigMap)) => "configmaps",
            Some(Source::Config(ConfigKind::Secret)) => "secrets",
            Some(Source::Config(ConfigKind::SecretProviderClass)) => "secretproviderclasspodstatuses",
            Some(Source::Namespaces | Source::NamespaceAnnotations) => "namespaces",
            Some(Source::Workload(_) | Source::SecretProviderClasses) | None => return,
        };
        self.ctx.metrics.events_received.with_label_values(&[event, resource]).inc();
    }

    fn update_gauges(&self, index: &crate::index::Index) {
        let (configs, workloads) = index.sizes();
        let g = &self.ctx.metrics.index_objects;
        g.with_label_values(&["resources"]).set(i64::try_from(configs).unwrap_or(i64::MAX));
        g.with_label_values(&["workloads"]).set(i64::try_from(workloads).unwrap_or(i64::MAX));
    }

    pub(super) fn apply(&mut self, o: Observed) {
        let now = Instant::now();
        match o {
            Observed::ListStarted(id) => self.list_started(id),
            Observed::ListDone(id) => self.list_done(id),
            Observed::Config { stream, mut key, facts, listed, views, digest } => {
                let baseline = self.baseline(stream, true);
                let mut index = self.ctx.index();
                key.namespace = index.intern(&key.namespace);
                if let Some(seen) = self.relisting.seen(stream, listed) {
                    seen.configs.insert(key.clone());
                }
                let before = index.config(&key).cloned();
                let hash = facts.hash;
                let update = index.upsert_config(key.clone(), facts, baseline);
                index.set_views(&key, hash, views);
                let changed_keys = index.observe_keys(&key, update, before, &digest);
                debug!(resource = %key, ?update, "observed");
                self.received(if update == ConfigUpdate::Created { "add" } else { "update" }, stream);
                if self.synced && matches!(update, ConfigUpdate::MetadataOnly | ConfigUpdate::Unchanged) && !listed {
                    self.ctx.metrics.skipped.with_label_values(&["no_data_change"]).inc();
                }
                self.update_gauges(&index);
                let trigger = match update {
                    ConfigUpdate::Changed { .. } => true,
                    ConfigUpdate::Created => baseline == Baseline::Stale,
                    ConfigUpdate::MetadataOnly | ConfigUpdate::Unchanged => false,
                };
                // Not a change upstream reacts to, but one that can change what a plan decides: a resource
                // (re)created under a name a workload has a record of, or its `ignore`/`match` flipped. Reconcile
                // now, so whatever follows happens now or never — not at the next restart or relist.
                let reconcile = match update {
                    ConfigUpdate::Created => self.listed.get(stream).copied().unwrap_or(false),
                    ConfigUpdate::MetadataOnly => true,
                    ConfigUpdate::Changed { .. } | ConfigUpdate::Unchanged => false,
                };
                if trigger && self.synced {
                    self.trigger(&index, &key, now, changed_keys.as_deref());
                } else if reconcile && self.synced && !self.ctx.webhook_mode() {
                    self.trigger_known(&index, &key, now);
                }
            }
            Observed::ConfigDeleted(key) => {
                let tombstone = self.ctx.settings.reload_on_delete;
                let resource = if key.kind == ConfigKind::Secret { "secrets" } else { "configmaps" };
                self.ctx.metrics.events_received.with_label_values(&["delete", resource]).inc();
                let mut index = self.ctx.index();
                if index.delete_config(&key, tombstone) && tombstone && self.synced {
                    self.trigger(&index, &key, now, None);
                }
            }
            Observed::Workload { stream, mut key, mut summary, listed } => {
                let baseline = self.baseline(stream, false);
                let mut index = self.ctx.index();
                key.namespace = index.intern(&key.namespace);
                let read_pods =
                    !key.kind.facts().has_pod_template && pod_uses::carry_pod_uses(&index, &key, &mut summary);
                if let Some(seen) = self.relisting.seen(stream, listed) {
                    seen.workloads.insert(key.clone());
                }
                let (rollout, generation) = (summary.rollout, summary.generation);
                let rollout_before = index.rollout(&key).map(|(state, _)| state);
                let update = index.upsert_workload(key.clone(), *summary, baseline);
                self.update_gauges(&index);
                let uid = index.workload_uid(&key);
                // Pods still to restart (`evict-pods`, `delete-pods`): its status moving (a replacement Ready) is
                // when the next step may go; between such moves the step only backs off.
                let restarting = index.pod_restart(&key).is_some();
                drop(index);
                // Only where the controller acts: a tenant outside its namespaces is not its to report on.
                let problems = if self.active(&key.namespace) { update.new_problems.as_slice() } else { &[] };
                for p in problems {
                    warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, key = %p.key,
                          value = %p.value, "{} '{}' in namespace '{}': {}", key.kind, key.name, key.namespace, p.message);
                    if let Some(events) = self.ctx.events() {
                        events.invalid_annotation(&key, uid.clone(), &p.message);
                    }
                }
                let next = self.ctx.budget.observe(&key, rollout, generation);
                self.ctx.budget.report(&self.ctx.metrics.rollouts);
                if let Some(next) = next {
                    self.enqueue(next, now, Lane::Change);
                }
                if rollout_before != Some(rollout) || update.relevant {
                    // Workloads held by its failed rollout, or waiting for its wave, look again.
                    for waiter in self.ctx.waiting.to_wake(now, Some(&key)) {
                        self.enqueue(waiter, now, Lane::Change);
                    }
                }
                if read_pods {
                    self.read_pod_uses(key.clone(), uid.clone().unwrap_or_default());
                }
                if (update.relevant || restarting) && self.synced {
                    self.enqueue(key, now, Lane::Change);
                }
            }
            Observed::PodUses { key, uid, uses } => self.pod_uses(key, &uid, uses, now),
            Observed::WorkloadDeleted(key) => self.forget_workload(&key, now),
            Observed::OwedJobs(keys) => {
                // Not a change: out of scope, it is someone else's, and not counted as a skipped change.
                for key in keys.into_iter().filter(|k| self.active(&k.namespace)) {
                    self.enqueue(key, now, Lane::Change);
                }
            }
            Observed::CsiStatus { stream, namespace, name, class_hash, listed } => {
                self.csi_status(stream, &namespace, &name, class_hash, listed, now);
            }
            Observed::CsiStatusDeleted { namespace, name } => self.csi.forget(&namespace, &name),
            Observed::CsiClass { namespace, name, ignored, matched } => {
                self.csi_class(namespace, name, ignored, matched)
            }
            Observed::NamespaceSelected { stream, name, listed } => {
                if let Some(seen) = self.relisting.seen(stream, listed) {
                    seen.namespaces.insert(name.clone());
                }
                if self.selected.insert(name.clone()) {
                    info!("added namespace to be watched: {name}");
                }
            }
            Observed::NamespaceDeselected(name) => {
                if self.selected.remove(&name) {
                    info!("removed namespace from watch: {name}");
                }
            }
            Observed::NamespaceAnnotations { stream, name, values, listed } => {
                self.namespace_annotations(stream, name, values, listed)
            }
            Observed::Error { stream, code, message } => self.failed(stream, code, &message, now),
            Observed::Recovered(stream) => self.recovered(stream),
            Observed::FallbackListed { config, lists } => self.fallback_listed(config, lists, now),
        }
    }

    /// On becoming leader: the `InvalidAnnotation` Events of problems seen while following (a follower logs them
    /// but publishes nothing; Events are the leader's).
    pub(super) fn report_problems(&self) {
        for (key, uid, messages) in self.ctx.index().workload_problems() {
            if !self.active(&key.namespace) {
                continue;
            }
            for message in messages {
                if let Some(events) = self.ctx.events() {
                    events.invalid_annotation(&key, uid.clone(), &message);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
