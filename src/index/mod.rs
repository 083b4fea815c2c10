//! What the controller remembers. Per ConfigMap/Secret: its content hash and the two annotations decisions
//! read — never its data. Per workload: its references, selecting annotations and the hashes it records.
//! Reverse maps find the workloads a change may concern without scanning every workload.
//!
//! "Applied" is level-triggered (design.md): a workload is reloaded for a resource when the hash it was last
//! rolled with differs from the resource's current hash. That hash is, in order: one we wrote and have not
//! yet seen echoed by the watch (`pending`), the `applied-hashes` record on the workload's metadata (written
//! with every reload, when a workload is first seen, and while it opts out, so restarts know it too), the
//! `STAKATER_*` env var / `last-reloaded-from` record on the pod template (upstream's), or an in-memory
//! baseline (`assumed`).

mod changes;
mod configs;
mod gates;
mod plan;
mod readers;
mod table;
mod views;

use std::{
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    sync::Arc,
};

pub use plan::{PlannedReload, WorkloadPlan, decide_pair};
pub use views::{KeyRegistry, KeyView, configmap_views, secret_views};

use crate::{
    hash::ContentHash,
    resource::ConfigKind,
    values::WorkloadProblem,
    workload::{WorkloadKey, WorkloadKind, WorkloadSummary},
};

/// Identity of a ConfigMap, Secret or SecretProviderClass.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    /// Kind.
    pub kind: ConfigKind,
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// What the index keeps per resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigFacts {
    /// Content hash (upstream SHA-1; upstream's delete marker once deleted).
    pub hash: ContentHash,
    /// What the `applied-hashes` record holds for this content: the hash itself, except for a Secret, where it
    /// is sealed under the Secret's UID ([`ContentHash::sealed`]) — readers of workloads do not see Secret UIDs,
    /// so the record reveals nothing about Secret content that upstream does not already write.
    pub record_hash: ContentHash,
    /// `ignore: "true"`.
    pub ignored: bool,
    /// `match: "true"`.
    pub matched: bool,
    /// Deleted, kept as a tombstone because `--reload-on-delete` is on.
    pub deleted: bool,
    /// Its `release-hold` annotation names this content's hold id: a failed rollout of it holds nothing
    /// (`crate::gates`).
    pub released: bool,
}

/// What the index keeps per resource: its facts and a fingerprint per key (to name changed keys).
struct ConfigEntry {
    facts: ConfigFacts,
    prints: crate::keyprints::KeyPrints,
}

/// How an upsert changed a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigUpdate {
    /// First seen.
    Created,
    /// Content changed (or a deleted resource came back).
    Changed {
        /// The previous hash.
        old: ContentHash,
    },
    /// Only annotations changed (never a trigger, as upstream).
    MetadataOnly,
    /// Nothing changed (e.g. a relist replay).
    Unchanged,
}

/// What a workload with no record is assumed to run with, for a resource first seen now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// The resource's current hash: nothing to do (upstream: creations do not reload by default).
    Current,
    /// Nothing: the next plan reloads it (`--reload-on-create`, `--sync-after-restart`).
    Stale,
}

impl Baseline {
    fn hash(self, current: ContentHash) -> ContentHash {
        match self {
            Self::Current => current,
            Self::Stale => ContentHash::NONE,
        }
    }
}

/// How an upsert changed a workload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadUpdate {
    /// New, or its references/annotations/records changed: worth reconciling.
    pub relevant: bool,
    /// Problems that are new with this version of the workload (to report once).
    pub new_problems: Vec<WorkloadProblem>,
}

type Pair = (ConfigKind, String);

/// How many deleted Secrets' sealed record values are kept (about 100 bytes each).
const DEPARTED_LIMIT: usize = 4096;

struct WorkloadState {
    summary: WorkloadSummary,
    /// Baselines and hashes we applied: what the workload is assumed to run with, absent a record.
    assumed: HashMap<Pair, ContentHash>,
    /// Hashes we wrote that the watch has not echoed yet (they beat possibly stale records).
    pending: HashMap<Pair, ContentHash>,
    /// The applied-hashes record we last wrote, until the watch echoes it.
    persisted: Option<crate::workload::HashRecord>,
    /// The reloads of a write the API server rejected permanently: not attempted again (nor logged again)
    /// until a resource changes again or the workload itself changes.
    rejected: Option<Vec<(Pair, ContentHash)>>,
    /// It opted out of key-level reloads while indexed: the values it recorded for the keys it reads still
    /// count as current (only then — for any other workload a whole-content hash that happens to equal a key
    /// set's hash must not).
    left_key_level: bool,
}

/// The in-memory index.
#[derive(Default)]
pub struct Index {
    configs: table::ConfigTable,
    /// Boxed: a `WorkloadState` is ~900 bytes and a hash table keeps its capacity's worth of slots, a quarter
    /// to a half of them empty (heaptrack at M1: 1.8 MB of table for 1,000 workloads).
    workloads: HashMap<WorkloadKey, Box<WorkloadState>>,
    referenced_by: HashMap<ConfigKey, readers::Readers>,
    with_named_lists: HashMap<Arc<str>, BTreeSet<WorkloadKey>>,
    namespaces: HashSet<Arc<str>>,
    /// Sealed record values of recently deleted Secrets, by their content hash: a Secret deleted and re-created
    /// with the same content (`kubectl replace --force`, `helm upgrade --force`) gets a new UID, so records sealed
    /// under the old one still count as current for that content. Bounded: the oldest are forgotten first.
    departed: HashMap<ConfigKey, (ContentHash, ContentHash)>,
    departed_order: VecDeque<ConfigKey>,
    /// `--hash-key-secret`: Secret hashes written on templates are keyed by it.
    hash_key: Option<crate::hash_key::HashKey>,
    /// Key-level reloads: the views of current contents, per resource, for the key sets in `key_registry`
    /// (a view outlives its key set until the content changes, so a workload opting out is recognised).
    views: HashMap<ConfigKey, Vec<KeyView>>,
    key_registry: Arc<KeyRegistry>,
    /// `--reload-on=keys-used`.
    keys_used_default: bool,
    /// The last few content changes of recently changed resources, with the keys they touched.
    recent: changes::RecentChanges,
    /// Namespaces' reload windows (`--namespace-reload-windows`).
    namespace_windows: HashMap<String, crate::window::ReloadWindow>,
    /// Resource streams that have not completed a list yet (kind, namespace or all): the index does not know
    /// all resources of that kind there, so plans keep what the object records for them.
    unlisted_config_sources: HashSet<(ConfigKind, Option<String>)>,
}

impl ConfigFacts {
    /// Facts of a live resource whose record holds its content hash as is.
    pub fn live(hash: ContentHash, ignored: bool, matched: bool) -> Self {
        Self { hash, record_hash: hash, ignored, matched, deleted: false, released: false }
    }

    /// The same facts, with the record's value sealed under `key` (a Secret's UID).
    pub fn sealed_by(self, key: &str) -> Self {
        Self { record_hash: self.hash.sealed(key.as_bytes()), ..self }
    }

    /// The same facts, released when `release_hold` (the resource's `release-hold` annotation) names this
    /// content's hold id. Call after [`Self::sealed_by`].
    pub fn released_by(self, release_hold: Option<&str>) -> Self {
        Self { released: release_hold.is_some_and(|v| crate::gates::releases(v, &self.record_hash)), ..self }
    }
}

impl Index {
    /// Sets the key Secret hashes are written under (`--hash-key-secret`).
    pub fn set_hash_key(&mut self, key: Option<crate::hash_key::HashKey>) {
        self.hash_key = key;
    }

    /// Shares one allocation per namespace name across keys.
    pub fn intern(&mut self, namespace: &str) -> Arc<str> {
        if let Some(ns) = self.namespaces.get(namespace) {
            return ns.clone();
        }
        let ns: Arc<str> = namespace.into();
        self.namespaces.insert(ns.clone());
        ns
    }

    /// Number of resources and workloads indexed.
    pub fn sizes(&self) -> (usize, usize) {
        (self.configs.len(), self.workloads.len())
    }

    /// How many entries each of the index's maps holds (`reloader_index_objects`): flat under churn when every
    /// way out forgets what it should (the soak scenario of `bench`).
    pub fn map_sizes(&self) -> [(&'static str, usize); 8] {
        let (assumed, pending) =
            self.workloads.values().fold((0, 0), |(a, p), w| (a + w.assumed.len(), p + w.pending.len()));
        [
            ("resources", self.configs.len()),
            ("workloads", self.workloads.len()),
            ("references", self.referenced_by.len()),
            ("named_list_namespaces", self.with_named_lists.len()),
            ("namespaces", self.namespaces.len()),
            ("departed", self.departed.len()),
            ("assumed", assumed),
            ("pending", pending),
        ]
    }

    /// Workloads that may reload when `key` changes: those referencing it and those with a named list for its
    /// kind in its namespace that matches its name.
    pub fn candidates(&self, key: &ConfigKey) -> Vec<WorkloadKey> {
        let mut out: BTreeSet<WorkloadKey> =
            self.referenced_by.get(key).into_iter().flat_map(|r| r.iter()).cloned().collect();
        for w in self.with_named_lists.get(&key.namespace).into_iter().flatten() {
            let named = self.workloads.get(w).map(|s| &s.summary.annotations.for_kind(key.kind).named);
            if named.is_some_and(|n| n.iter().any(|p| p.matches(&key.name))) {
                out.insert(w.clone());
            }
        }
        out.into_iter().collect()
    }

    /// Records a workload; keeps what we know about it when the UID is unchanged. Resources it may use that it
    /// has no baseline for get one per `baseline`.
    pub fn upsert_workload(
        &mut self,
        key: WorkloadKey,
        mut summary: WorkloadSummary,
        baseline: Baseline,
    ) -> WorkloadUpdate {
        // Most workload events are status updates that change nothing indexed: keep everything as it is.
        if self.workloads.get(&key).is_some_and(|s| s.summary == summary) {
            return WorkloadUpdate::default();
        }
        let (mut assumed, mut pending, mut persisted, mut rejected, mut old_summary, left) =
            match self.remove_workload(&key) {
                Some(s) if s.summary.uid == summary.uid => {
                    let left = s.left_key_level || self.key_level(&s.summary);
                    (s.assumed, s.pending, s.persisted, s.rejected, Some(s.summary), left)
                }
                _ => Default::default(),
            };
        let left_key_level = left && !self.key_level(&summary);
        // Only our own record's echo (or its rollout's progress) leaves a rejection standing; any other change of
        // the workload retries.
        let only_record_changed = old_summary.as_mut().is_some_and(|o| o.equal_but(&mut summary, true));
        // A rollout progressing changes nothing a plan reads.
        let only_rollout_changed =
            old_summary.as_mut().is_some_and(|o| o.rollout != summary.rollout && o.equal_but(&mut summary, false));
        if !only_record_changed {
            rejected = None;
        }
        pending.retain(|pair, hash| plan::template_record(&summary, pair, None) != Some(*hash));
        if persisted.as_ref() == Some(&summary.applied_hashes) {
            persisted = None;
        }
        let update = WorkloadUpdate {
            relevant: old_summary.as_ref() != Some(&summary) && !only_rollout_changed,
            new_problems: summary
                .annotations
                .problems
                .iter()
                .filter(|p| old_summary.as_ref().is_none_or(|o| !o.annotations.problems.contains(p)))
                .cloned()
                .collect(),
        };
        for u in &summary.uses {
            let ck = ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() };
            self.referenced_by.entry(ck).or_default().insert(key.clone());
        }
        if summary.annotations.has_named_list() {
            self.with_named_lists.entry(key.namespace.clone()).or_default().insert(key.clone());
        }
        let candidates = self.candidate_configs(&key, &summary);
        // Only what a plan reads is kept: names a workload no longer uses or matches (kustomize's hash-suffixed
        // names, a named list's past matches) would otherwise pile up (issue 27, finding 6).
        let candidate = |(kind, name): &Pair| {
            candidates.contains(&ConfigKey { kind: *kind, namespace: key.namespace.clone(), name: name.clone() })
        };
        assumed.retain(|pair, _| candidate(pair));
        pending.retain(|pair, _| candidate(pair));
        for config in candidates {
            if let Some(f) = self.configs.get(&config).map(|e| &e.facts) {
                let has_record = plan::has_record(&summary, &(config.kind, config.name.clone()));
                let value = if has_record { f.hash } else { baseline.hash(f.hash) };
                assumed.entry((config.kind, config.name)).or_insert(value);
            }
        }
        let partial_uses = old_summary.iter().flat_map(|o| &o.uses).chain(&summary.uses).filter(|u| u.keys.is_some());
        let touched: BTreeSet<ConfigKey> = partial_uses
            .map(|u| ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() })
            .collect();
        let state = WorkloadState { summary, assumed, pending, persisted, rejected, left_key_level };
        self.workloads.insert(key, Box::new(state));
        for config in &touched {
            self.refresh_wanted(config);
        }
        update
    }

    fn remove_workload(&mut self, key: &WorkloadKey) -> Option<WorkloadState> {
        let state = *self.workloads.remove(key)?;
        for u in &state.summary.uses {
            let ck = ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() };
            if let Some(set) = self.referenced_by.get_mut(&ck) {
                set.remove(key);
                if set.is_empty() {
                    self.referenced_by.remove(&ck);
                }
            }
        }
        if let Some(set) = self.with_named_lists.get_mut(&key.namespace) {
            set.remove(key);
            if set.is_empty() {
                self.with_named_lists.remove(&key.namespace);
            }
        }
        Some(state)
    }

    /// Forgets the pair of a resource that is gone for good from what the workloads that may use it assumed or
    /// wrote (a plan reads them only for resources that exist).
    fn forget_pair(&mut self, config: &ConfigKey) {
        let pair = (config.kind, config.name.clone());
        for w in self.candidates(config) {
            if let Some(state) = self.workloads.get_mut(&w) {
                state.assumed.remove(&pair);
                state.pending.remove(&pair);
            }
        }
    }

    /// Drops the shared names of namespaces nothing indexed refers to any more (preview environments come and
    /// go: their names would otherwise stay for the life of the process).
    fn forget_unused_namespaces(&mut self) {
        self.namespaces.retain(|ns| Arc::strong_count(ns) > 1);
    }

    /// `key` is taken not to run with `config`'s current content yet (it existed before a change the
    /// controller could not see it for): the next plan reloads it if it selects `config` and has no record.
    pub fn mark_unapplied(&mut self, key: &WorkloadKey, config: &ConfigKey) {
        if let Some(state) = self.workloads.get_mut(key) {
            state.assumed.insert((config.kind, config.name.clone()), ContentHash::NONE);
        }
    }

    /// A workload's UID (for Events).
    pub fn workload_uid(&self, key: &WorkloadKey) -> Option<String> {
        self.workloads.get(key).map(|s| s.summary.uid.clone()).filter(|u| !u.is_empty())
    }

    /// Whether a workload asks for Argo's restart strategy.
    pub fn restart_strategy(&self, key: &WorkloadKey) -> bool {
        self.workloads.get(key).is_some_and(|s| s.summary.restart_strategy)
    }

    /// A workload's pause state.
    pub fn pause_state(&self, key: &WorkloadKey) -> Option<crate::pause::PauseState> {
        self.workloads.get(key).map(|s| s.summary.pause.clone())
    }

    /// Remembers that the API server permanently rejected `plan`'s reloads.
    pub fn mark_rejected(&mut self, key: &WorkloadKey, plan: &WorkloadPlan) {
        if let Some(state) = self.workloads.get_mut(key) {
            state.rejected = Some(plan::reload_set(plan));
        }
    }

    /// Forgets a deleted workload.
    pub fn delete_workload(&mut self, key: &WorkloadKey) -> bool {
        let Some(state) = self.remove_workload(key) else { return false };
        for u in state.summary.uses.iter().filter(|u| u.keys.is_some()) {
            self.refresh_wanted(&ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() });
        }
        self.forget_unused_namespaces();
        true
    }

    /// Keys of every indexed workload.
    pub fn workload_keys(&self) -> Vec<WorkloadKey> {
        self.workloads.keys().cloned().collect()
    }

    /// Every workload with a problem in its annotations, its UID and the problems' messages.
    pub fn workload_problems(&self) -> Vec<(WorkloadKey, Option<String>, Vec<String>)> {
        let problems = self.workloads.iter().filter(|(_, w)| !w.summary.annotations.problems.is_empty());
        problems
            .map(|(k, w)| {
                let messages = w.summary.annotations.problems.iter().map(|p| p.message.clone()).collect();
                (k.clone(), Some(w.summary.uid.clone()).filter(|u| !u.is_empty()), messages)
            })
            .collect()
    }

    /// Keys of the workloads of `kind` (in `namespace`, if given) — for pruning after a relist.
    pub fn workloads_of(&self, kind: WorkloadKind, namespace: Option<&str>) -> Vec<WorkloadKey> {
        self.workloads
            .keys()
            .filter(|k| k.kind == kind && namespace.is_none_or(|ns| *k.namespace == *ns))
            .cloned()
            .collect()
    }

    /// The resources a workload may be reloaded for: those it uses, and those its named lists match.
    fn candidate_configs(&self, key: &WorkloadKey, summary: &WorkloadSummary) -> BTreeSet<ConfigKey> {
        let mut out: BTreeSet<ConfigKey> = summary
            .uses
            .iter()
            .map(|u| ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() })
            .collect();
        if summary.annotations.has_named_list() {
            out.extend(
                self.configs
                    .keys_in(&key.namespace)
                    .filter(|c| summary.annotations.for_kind(c.kind).named.iter().any(|p| p.matches(&c.name)))
                    .cloned(),
            );
        }
        out
    }
}

#[cfg(test)]
mod changes_tests;
#[cfg(test)]
mod key_tests;
#[cfg(test)]
mod secret_tests;
#[cfg(test)]
mod tests;
