//! What the controller remembers. Per ConfigMap/Secret: its content hash and the two annotations decisions
//! read — never its data. Per workload: its references, selecting annotations and the hashes it records.
//! Reverse maps find the workloads a change may concern without scanning every workload.
//!
//! "Applied" is level-triggered (design.md): a workload is reloaded for a resource when the hash it was last
//! rolled with differs from the resource's current hash. That hash is, in order: one we wrote and have not
//! yet seen echoed by the watch (`pending`), the `STAKATER_*` env var / `last-reloaded-from` record on the
//! template, or a baseline (`assumed`) taken when the pair was first seen or while the workload did not
//! select the resource. A relist or restart therefore converges to "nothing to do" when nothing changed.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::Arc,
};

use crate::{
    annotations::WorkloadProblem,
    decision::{DecisionSettings, ReloadDecision, ReloadReason, ResourceFacts, SkipReason, WorkloadFacts, decide},
    hash::ContentHash,
    resource::{ConfigKind, env_var_name},
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
    /// Content hash (upstream SHA-1).
    pub hash: ContentHash,
    /// `ignore: "true"`.
    pub ignored: bool,
    /// `match: "true"`.
    pub matched: bool,
}

/// How an upsert changed a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigUpdate {
    /// First seen.
    Created,
    /// Content changed.
    Changed {
        /// The previous hash.
        old: ContentHash,
    },
    /// Only annotations changed (never a trigger, as upstream).
    MetadataOnly,
    /// Nothing changed (e.g. a relist replay).
    Unchanged,
}

/// How an upsert changed a workload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadUpdate {
    /// New, or its references/annotations/records changed: worth reconciling.
    pub relevant: bool,
    /// Annotation problems that are new with this version of the workload (to report once).
    pub new_problems: Vec<WorkloadProblem>,
}

/// One resource a workload must be reloaded for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedReload {
    /// The resource.
    pub config: ConfigKey,
    /// Its current hash.
    pub hash: ContentHash,
    /// The hash the workload was rolled with.
    pub previous: ContentHash,
    /// Container receiving the env var.
    pub container: String,
    /// Why.
    pub reason: ReloadReason,
}

type Pair = (ConfigKind, String);

struct WorkloadState {
    summary: WorkloadSummary,
    /// Baselines and hashes we applied: what the workload is assumed to run with, absent a record.
    assumed: HashMap<Pair, ContentHash>,
    /// Hashes we wrote that the watch has not echoed yet (they beat possibly stale records).
    pending: HashMap<Pair, ContentHash>,
}

/// The in-memory index.
#[derive(Default)]
pub struct Index {
    configs: HashMap<ConfigKey, ConfigFacts>,
    workloads: HashMap<WorkloadKey, WorkloadState>,
    referenced_by: HashMap<ConfigKey, BTreeSet<WorkloadKey>>,
    with_named_lists: HashMap<Arc<str>, BTreeSet<WorkloadKey>>,
    namespaces: HashSet<Arc<str>>,
}

impl Index {
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

    /// The facts of a resource.
    pub fn config(&self, key: &ConfigKey) -> Option<&ConfigFacts> {
        self.configs.get(key)
    }

    /// Records a resource. A new resource becomes the baseline of every workload that may use it.
    pub fn upsert_config(&mut self, key: ConfigKey, facts: ConfigFacts) -> ConfigUpdate {
        let update = match self.configs.insert(key.clone(), facts) {
            None => ConfigUpdate::Created,
            Some(old) if old.hash != facts.hash => ConfigUpdate::Changed { old: old.hash },
            Some(old) if old != facts => ConfigUpdate::MetadataOnly,
            Some(_) => ConfigUpdate::Unchanged,
        };
        if update == ConfigUpdate::Created {
            let pair = (key.kind, key.name.clone());
            for w in self.candidates(&key) {
                if let Some(state) = self.workloads.get_mut(&w) {
                    state.assumed.entry(pair.clone()).or_insert(facts.hash);
                }
            }
        }
        update
    }

    /// Forgets a resource.
    pub fn remove_config(&mut self, key: &ConfigKey) -> bool {
        self.configs.remove(key).is_some()
    }

    /// Workloads that may reload when `key` changes: those referencing it and those with a named list for its
    /// kind in its namespace that matches its name.
    pub fn candidates(&self, key: &ConfigKey) -> Vec<WorkloadKey> {
        let mut out: BTreeSet<WorkloadKey> = self.referenced_by.get(key).cloned().unwrap_or_default();
        for w in self.with_named_lists.get(&key.namespace).into_iter().flatten() {
            let named = self.workloads.get(w).map(|s| &s.summary.annotations.for_kind(key.kind).named);
            if named.is_some_and(|n| n.iter().any(|p| p.matches(&key.name))) {
                out.insert(w.clone());
            }
        }
        out.into_iter().collect()
    }

    /// Records a workload; keeps what we know about it when the UID is unchanged.
    pub fn upsert_workload(&mut self, key: WorkloadKey, summary: WorkloadSummary) -> WorkloadUpdate {
        let old = self.remove_workload(&key);
        let (mut assumed, mut pending, old_summary) = match old {
            Some(s) if s.summary.uid == summary.uid => (s.assumed, s.pending, Some(s.summary)),
            _ => Default::default(),
        };
        pending.retain(|pair, hash| record(&summary, pair, None) != Some(*hash));
        let update = WorkloadUpdate {
            relevant: old_summary.as_ref() != Some(&summary),
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
        let state = WorkloadState { summary, assumed: HashMap::new(), pending: HashMap::new() };
        for config in self.candidate_configs(&key, &state.summary) {
            if let Some(f) = self.configs.get(&config) {
                assumed.entry((config.kind, config.name)).or_insert(f.hash);
            }
        }
        self.workloads.insert(key, WorkloadState { assumed, pending, ..state });
        update
    }

    /// Forgets a workload.
    fn remove_workload(&mut self, key: &WorkloadKey) -> Option<WorkloadState> {
        let state = self.workloads.remove(key)?;
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
        }
        Some(state)
    }

    /// Forgets a deleted workload.
    pub fn delete_workload(&mut self, key: &WorkloadKey) -> bool {
        self.remove_workload(key).is_some()
    }

    /// Keys of every indexed workload.
    pub fn workload_keys(&self) -> Vec<WorkloadKey> {
        self.workloads.keys().cloned().collect()
    }

    /// Keys of the workloads of `kind` (in `namespace`, if given) — for pruning after a relist.
    pub fn workloads_of(&self, kind: WorkloadKind, namespace: Option<&str>) -> Vec<WorkloadKey> {
        self.workloads
            .keys()
            .filter(|k| k.kind == kind && namespace.is_none_or(|ns| *k.namespace == *ns))
            .cloned()
            .collect()
    }

    /// Keys of the resources of `kind` (in `namespace`, if given) — for pruning after a relist.
    pub fn configs_of(&self, kind: ConfigKind, namespace: Option<&str>) -> Vec<ConfigKey> {
        self.configs
            .keys()
            .filter(|k| k.kind == kind && namespace.is_none_or(|ns| *k.namespace == *ns))
            .cloned()
            .collect()
    }

    fn candidate_configs(&self, key: &WorkloadKey, summary: &WorkloadSummary) -> BTreeSet<ConfigKey> {
        let mut out: BTreeSet<ConfigKey> = summary
            .uses
            .iter()
            .map(|u| ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() })
            .collect();
        if summary.annotations.has_named_list() {
            out.extend(
                self.configs
                    .keys()
                    .filter(|c| {
                        c.namespace == key.namespace
                            && summary.annotations.for_kind(c.kind).named.iter().any(|p| p.matches(&c.name))
                    })
                    .cloned(),
            );
        }
        out
    }

    /// What `key` must be reloaded for now. Resources it does not select become its new baseline, so that
    /// selecting them later (an annotation added) does not by itself cause a rollout.
    pub fn plan(&mut self, key: &WorkloadKey, settings: DecisionSettings) -> Vec<PlannedReload> {
        let Some(state) = self.workloads.get(key) else { return Vec::new() };
        let configs = self.candidate_configs(key, &state.summary);
        let mut out = Vec::new();
        let mut baselines = Vec::new();
        for config in configs {
            let Some(facts) = self.configs.get(&config) else { continue };
            let s = &state.summary;
            let workload = WorkloadFacts {
                selection: s.annotations.for_kind(config.kind),
                uses: &s.uses,
                first_container: s.first_container.as_deref(),
            };
            let resource =
                ResourceFacts { kind: config.kind, name: &config.name, ignored: facts.ignored, matched: facts.matched };
            let pair = (config.kind, config.name.clone());
            match decide(&workload, &resource, settings) {
                ReloadDecision::Skip(SkipReason::NoContainer) => {}
                ReloadDecision::Skip(_) => baselines.push((pair, facts.hash)),
                ReloadDecision::Reload { container, reason } => {
                    let applied = state
                        .pending
                        .get(&pair)
                        .copied()
                        .or_else(|| record(s, &pair, Some(&container)))
                        .or_else(|| state.assumed.get(&pair).copied());
                    match applied {
                        None => baselines.push((pair, facts.hash)),
                        Some(previous) if previous != facts.hash => {
                            out.push(PlannedReload { config, hash: facts.hash, previous, container, reason });
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        if let Some(state) = self.workloads.get_mut(key) {
            state.assumed.extend(baselines);
        }
        out
    }

    /// Remembers what a successful patch wrote.
    pub fn mark_applied(&mut self, key: &WorkloadKey, reloads: &[PlannedReload]) {
        if let Some(state) = self.workloads.get_mut(key) {
            for r in reloads {
                let pair = (r.config.kind, r.config.name.clone());
                state.assumed.insert(pair.clone(), r.hash);
                state.pending.insert(pair, r.hash);
            }
        }
    }
}

/// The hash a workload's template records for a resource: its `STAKATER_*` env var (in `container` when
/// known, else in any container), else a `last-reloaded-from` annotation naming it.
fn record(summary: &WorkloadSummary, (kind, name): &Pair, container: Option<&str>) -> Option<ContentHash> {
    let env = env_var_name(*kind, name);
    let in_container = |c: Option<&str>| {
        summary.env_records.iter().find(|(cn, en, _)| *en == env && c.is_none_or(|c| c == cn)).map(|(_, _, h)| *h)
    };
    in_container(container)
        .or_else(|| in_container(None))
        .or_else(|| summary.annotation_record.as_ref().filter(|(k, n, _)| k == kind && n == name).map(|(_, _, h)| *h))
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
