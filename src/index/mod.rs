//! What the controller remembers. Per ConfigMap/Secret: its content hash and the two annotations decisions
//! read — never its data. Per workload: its references, selecting annotations and the hashes it records.
//! Reverse maps find the workloads a change may concern without scanning every workload.
//!
//! "Applied" is level-triggered (design.md): a workload is reloaded for a resource when the hash it was last
//! rolled with differs from the resource's current hash. Where that hash comes from — the `applied-hashes`
//! record on the object, and what memory adds to it — is [`applied`]'s header.

mod applied;
mod changes;
mod configs;
mod gates;
mod plan;
mod readers;
mod table;
mod views;
mod workloads;

use std::{
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    sync::Arc,
};

pub use plan::{PlannedReload, WorkloadPlan, decide_pair};
pub use views::{KeyRegistry, KeyView, configmap_views, secret_views};

pub use workloads::WorkloadUpdate;

pub use crate::rules::keys::ConfigKey;
use workloads::WorkloadState;

use crate::rules::{hash::ContentHash, resource::ConfigKind};
use crate::workload::{WorkloadKey, WorkloadSummary};

/// What the index keeps per resource.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// (`crate::rules::gates`).
    pub released: bool,
    /// When this content was written, in seconds since the epoch as the API server recorded it (0: unknown):
    /// `evict-pods` restarts the pods created before it, whenever the controller sees the change (after a restart,
    /// too). Four bytes, not a 16-byte `Option<Timestamp>`: one per resource, tens of thousands of them.
    pub written_second: u32,
    /// The namespaces whose workloads may name it from there (its `allow-references-from` annotation; issue 38):
    /// 8 bytes, null without the annotation.
    pub consent: crate::rules::decision::ReferenceConsent,
}

/// What the index keeps per resource: its facts and a fingerprint per key (to name changed keys).
struct ConfigEntry {
    facts: ConfigFacts,
    prints: crate::rules::keyprints::KeyPrints,
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

type Pair = (ConfigKind, String);

/// A resource as a workload in `namespace` names it in its records: its name, or `<namespace>/<name>` for one in
/// another namespace (a cross-namespace reference; names cannot contain `/`). The `STAKATER_*` variable is named
/// from it too, so a local and a remote resource of one name never share one.
pub fn pair_of(namespace: &str, config: &ConfigKey) -> Pair {
    if &*config.namespace == namespace {
        (config.kind, config.name.clone())
    } else {
        (config.kind, format!("{}/{}", config.namespace, config.name))
    }
}

/// The resource a workload in `namespace` names by `pair` ([`pair_of`]'s inverse).
fn config_of(namespace: &Arc<str>, (kind, name): &Pair) -> ConfigKey {
    match name.split_once('/') {
        Some((ns, name)) => ConfigKey { kind: *kind, namespace: ns.into(), name: name.to_owned() },
        None => ConfigKey { kind: *kind, namespace: namespace.clone(), name: name.clone() },
    }
}

/// How many deleted Secrets' sealed record values are kept (about 100 bytes each).
const DEPARTED_LIMIT: usize = 4096;

/// The in-memory index.
#[derive(Default)]
pub struct Index {
    configs: table::ConfigTable,
    /// Boxed: a `WorkloadState` is ~900 bytes and a hash table keeps its capacity's worth of slots, a quarter
    /// to a half of them empty (heaptrack at M1: 1.8 MB of table for 1,000 workloads).
    workloads: HashMap<WorkloadKey, Box<WorkloadState>>,
    /// Per resource, the workloads whose pod spec uses it or whose named list names it (plain names).
    referenced_by: HashMap<ConfigKey, readers::Readers>,
    /// Per namespace, the workloads with a regex in a named list: matched against each resource changed there.
    with_named_lists: HashMap<Arc<str>, BTreeSet<WorkloadKey>>,
    namespaces: HashSet<Arc<str>>,
    /// Sealed record values of recently deleted Secrets, by their content hash: a Secret deleted and re-created
    /// with the same content (`kubectl replace --force`, `helm upgrade --force`) gets a new UID, so records sealed
    /// under the old one still count as current for that content. Bounded: the oldest are forgotten first.
    departed: HashMap<ConfigKey, (ContentHash, ContentHash)>,
    departed_order: VecDeque<ConfigKey>,
    /// `--hash-key-secret`: Secret hashes written on templates are keyed by it.
    hash_key: Option<crate::hash_key::HashKey>,
    /// `--allow-cross-namespace-references`: without it, `<namespace>/<name>` entries naming another namespace are
    /// not indexed.
    cross_namespace: bool,
    /// Key-level reloads: the views of current contents, per resource, for the key sets in `key_registry`
    /// (a view outlives its key set until the content changes, so a workload opting out is recognised).
    views: HashMap<ConfigKey, Vec<KeyView>>,
    key_registry: Arc<KeyRegistry>,
    /// `--reload-on=keys-used`.
    keys_used_default: bool,
    /// The last few content changes of recently changed resources, with the keys they touched.
    recent: changes::RecentChanges,
    /// Namespaces' reload windows (`--namespace-reload-windows`).
    namespace_windows: HashMap<String, crate::rules::window::ReloadWindow>,
    /// Namespaces' rules (`--namespace-rules`), those with any set.
    namespace_rules: HashMap<String, crate::rules::decision::NamespaceRules>,
    /// Resource streams that have not completed a list yet (kind, namespace or all): the index does not know
    /// all resources of that kind there, so plans keep what the object records for them.
    unlisted_config_sources: HashSet<(ConfigKind, Option<String>)>,
}

impl ConfigFacts {
    /// Facts of a live resource whose record holds its content hash as is.
    pub fn live(hash: ContentHash, ignored: bool, matched: bool) -> Self {
        Self {
            hash,
            record_hash: hash,
            ignored,
            matched,
            deleted: false,
            released: false,
            written_second: 0,
            consent: Default::default(),
        }
    }

    /// The same facts, with the consent of its `allow-references-from` annotation (`None`: absent).
    pub fn consenting(self, allow_references_from: Option<&str>) -> Self {
        Self { consent: crate::rules::decision::ReferenceConsent::parse(allow_references_from), ..self }
    }

    /// The same facts, written at `at` (see [`Self::written_at`]); a time outside `u32` seconds is unknown.
    pub fn written(self, at: Option<jiff::Timestamp>) -> Self {
        let written_second = at.and_then(|t| u32::try_from(t.as_second()).ok()).unwrap_or(0);
        Self { written_second, ..self }
    }

    /// When this content was written, to the second, if known.
    pub fn written_at(&self) -> Option<jiff::Timestamp> {
        (self.written_second != 0).then(|| jiff::Timestamp::from_second(self.written_second.into()).ok()).flatten()
    }

    /// The same facts, with the record's value sealed under `key` (a Secret's UID).
    pub fn sealed_by(self, key: &str) -> Self {
        Self { record_hash: self.hash.sealed(key.as_bytes()), ..self }
    }

    /// The same facts, released when `release_hold` (the resource's `release-hold` annotation) names this
    /// content's hold id. Call after [`Self::sealed_by`].
    pub fn released_by(self, release_hold: Option<&str>) -> Self {
        Self { released: release_hold.is_some_and(|v| crate::rules::gates::releases(v, &self.record_hash)), ..self }
    }
}

impl Index {
    /// Sets the key Secret hashes are written under (`--hash-key-secret`).
    pub fn set_hash_key(&mut self, key: Option<crate::hash_key::HashKey>) {
        self.hash_key = key;
    }

    /// Sets whether `<namespace>/<name>` entries naming another namespace are indexed
    /// (`--allow-cross-namespace-references`). Before any workload is indexed: the reverse maps follow it.
    pub fn set_cross_namespace(&mut self, allowed: bool) {
        self.cross_namespace = allowed;
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
    pub fn map_sizes(&self) -> [(&'static str, usize); 10] {
        let (baselines, unechoed) =
            self.workloads.values().fold((0, 0), |(b, u), w| (b + w.baselines.len(), u + w.unechoed.len()));
        [
            ("resources", self.configs.len()),
            ("workloads", self.workloads.len()),
            ("references", self.referenced_by.len()),
            ("named_list_namespaces", self.with_named_lists.len()),
            ("namespaces", self.namespaces.len()),
            ("departed", self.departed.len()),
            ("baselines", baselines),
            ("unechoed", unechoed),
            ("recent_changes", self.recent_changes()),
            ("key_views", self.views.len()),
        ]
    }

    /// Drops the shared names of namespaces nothing refers to any more (preview environments come and go: their
    /// names would otherwise stay for the life of the process). Housekeeping, every 10 s: one pass over the
    /// names, not one per deletion.
    pub fn forget_unused_namespaces(&mut self) {
        self.namespaces.retain(|ns| Arc::strong_count(ns) > 1);
    }
}

#[cfg(test)]
mod changes_tests;
#[cfg(test)]
mod cross_namespace_tests;
#[cfg(test)]
mod key_tests;
#[cfg(test)]
mod record_tests;
#[cfg(test)]
mod secret_tests;
#[cfg(test)]
mod tests;
