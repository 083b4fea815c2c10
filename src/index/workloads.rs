//! The index's workloads: what each one uses and selects and the hashes it is known to run with, the reverse
//! maps from a resource to the workloads it may concern, and forgetting a workload or a resource's pair.

use std::collections::{BTreeSet, HashMap};

use super::{
    Baseline, ConfigKey, Index, Pair, WorkloadPlan,
    applied::{self, Unechoed},
    plan,
};
use crate::rules::{hash::ContentHash, values::WorkloadProblem};
use crate::workload::{WorkloadKey, WorkloadKind, WorkloadSummary};

/// How an upsert changed a workload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadUpdate {
    /// New, or its references/annotations/records changed: worth reconciling.
    pub relevant: bool,
    /// Problems that are new with this version of the workload (to report once).
    pub new_problems: Vec<WorkloadProblem>,
}

/// What the index keeps per workload: its summary (what the object shows) and what memory adds to it. Every
/// field but the summary is a cache or a guard the record on the object cannot carry (design.md, "a new side map
/// needs a reason the record cannot carry"), and each is dropped with the workload.
pub(super) struct WorkloadState {
    pub(super) summary: WorkloadSummary,
    /// Per resource the object records nothing of, what the workload is taken to run with (see
    /// [`super::applied`]): the object has no place for it until the first plan writes the record, nor ever in
    /// record-less mode. Pruned to the resources it may still use on every upsert; dropped with the pair.
    pub(super) baselines: HashMap<Pair, ContentHash>,
    /// What our last write put on the object, until the watch echoes it.
    pub(super) unechoed: Unechoed,
    /// The reloads of a write the API server rejected permanently: not attempted again (nor logged again)
    /// until a resource changes again or the workload itself changes. A guard against a hot loop (design.md,
    /// "Errors and bad input"), not state of the object.
    pub(super) rejected: Option<Vec<(Pair, ContentHash)>>,
    /// It opted out of key-level reloads while indexed: the values it recorded for the keys it reads still
    /// count as current (only then — for any other workload a whole-content hash that happens to equal a key
    /// set's hash must not). The object shows the opt-out, not that it was opted in before.
    pub(super) left_key_level: bool,
}

impl Index {
    /// Workloads that may reload when `key` changes: those referencing or naming it, and those of its namespace
    /// with a regex in a named list that matches its name.
    pub fn candidates(&self, key: &ConfigKey) -> Vec<WorkloadKey> {
        let mut out: BTreeSet<WorkloadKey> =
            self.referenced_by.get(key).into_iter().flat_map(|r| r.iter()).cloned().collect();
        for w in self.with_named_lists.get(&key.namespace).into_iter().flatten() {
            let selection = self.workloads.get(w).map(|s| s.summary.annotations.for_kind(key.kind));
            if selection.is_some_and(|s| s.named.iter().any(|p| p.matches(&key.name))) {
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
        let (mut baselines, mut unechoed, mut rejected, mut old_summary, left) = match self.remove_workload(&key) {
            Some(s) if s.summary.uid == summary.uid => {
                let left = s.left_key_level || self.key_level(&s.summary);
                (s.baselines, s.unechoed, s.rejected, Some(s.summary), left)
            }
            _ => Default::default(),
        };
        let left_key_level = left && !self.key_level(&summary);
        // Only our own record's echo (or its rollout's progress) leaves a rejection standing; any other change of
        // the workload retries.
        let only_record_changed = old_summary.as_mut().is_some_and(|o| o.equal_but(&mut summary, true));
        // A rollout progressing (or another writer of the spec, which only the restart budget reads at a start)
        // changes nothing a plan reads.
        let rollout_of = |s: &WorkloadSummary| (s.rollout, s.generation, s.spec_written_last_by_us);
        let only_rollout_changed = old_summary
            .as_mut()
            .is_some_and(|o| rollout_of(o) != rollout_of(&summary) && o.equal_but(&mut summary, false));
        if !only_record_changed {
            rejected = None;
        }
        unechoed.echoed(&summary);
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
        for ck in named_or_used(&key, &summary, self.cross_namespace) {
            self.referenced_by.entry(ck).or_default().insert(key.clone());
        }
        if summary.annotations.has_pattern_list() {
            self.with_named_lists.entry(key.namespace.clone()).or_default().insert(key.clone());
        }
        let candidates = self.candidate_configs(&key, &summary);
        // Only what a plan reads is kept: names a workload no longer uses or matches (kustomize's hash-suffixed
        // names, a named list's past matches) would otherwise pile up (issue 27, finding 6).
        let candidate = |pair: &Pair| candidates.contains(&super::config_of(&key.namespace, pair));
        baselines.retain(|pair, _| candidate(pair));
        unechoed.retain(candidate);
        for config in candidates {
            if let Some(f) = self.configs.get(&config).map(|e| &e.facts) {
                let pair = super::pair_of(&key.namespace, &config);
                let has_record = applied::has_record(&summary, &pair);
                let value = if has_record { f.hash } else { baseline.hash(f.hash) };
                baselines.entry(pair).or_insert(value);
            }
        }
        let partial_uses = old_summary.iter().flat_map(|o| &o.uses).chain(&summary.uses).filter(|u| u.keys.is_some());
        let touched: BTreeSet<ConfigKey> = partial_uses
            .map(|u| ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() })
            .collect();
        let state = WorkloadState { summary, baselines, unechoed, rejected, left_key_level };
        self.workloads.insert(key, Box::new(state));
        for config in &touched {
            self.refresh_wanted(config);
        }
        update
    }

    fn remove_workload(&mut self, key: &WorkloadKey) -> Option<WorkloadState> {
        let state = *self.workloads.remove(key)?;
        for ck in named_or_used(key, &state.summary, self.cross_namespace) {
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
    pub(super) fn forget_pair(&mut self, config: &ConfigKey) {
        for w in self.candidates(config) {
            let pair = super::pair_of(&w.namespace, config);
            if let Some(state) = self.workloads.get_mut(&w) {
                state.baselines.remove(&pair);
                state.unechoed.forget(&pair);
            }
        }
    }

    /// `key` is taken not to run with `config`'s current content yet (it existed before a change the
    /// controller could not see it for): the next plan reloads it if it selects `config` and has no record.
    pub fn mark_unapplied(&mut self, key: &WorkloadKey, config: &ConfigKey) {
        if let Some(state) = self.workloads.get_mut(key) {
            state.baselines.insert(super::pair_of(&key.namespace, config), ContentHash::NONE);
        }
    }

    /// Whether the watch shows `key`.
    pub fn has_workload(&self, key: &WorkloadKey) -> bool {
        self.workloads.contains_key(key)
    }

    /// A workload's summary as indexed.
    pub fn workload_summary(&self, key: &WorkloadKey) -> Option<&WorkloadSummary> {
        self.workloads.get(key).map(|s| &s.summary)
    }

    /// A workload's UID (for Events).
    pub fn workload_uid(&self, key: &WorkloadKey) -> Option<String> {
        self.workloads.get(key).map(|s| s.summary.uid.clone()).filter(|u| !u.is_empty())
    }

    /// The rollout strategy a workload's annotation asks for, if it names one.
    pub fn rollout_strategy(&self, key: &WorkloadKey) -> Option<crate::rules::strategy::RolloutStrategy> {
        self.workloads.get(key).and_then(|s| s.summary.rollout_strategy)
    }

    /// A workload's owed pod restarts (`evict-pods`, `delete-pods`): its boundary, and the rollout strategy its
    /// annotation names.
    pub fn pod_restart(
        &self,
        key: &WorkloadKey,
    ) -> Option<(crate::rules::pod_restarts::Boundary, Option<crate::rules::strategy::RolloutStrategy>)> {
        let summary = &self.workloads.get(key)?.summary;
        Some((summary.restart_pods_before.clone()?, summary.rollout_strategy))
    }

    /// A CronJob's `cronjob-reload` mode (`spawn` for anything not indexed).
    pub fn cronjob_reload(&self, key: &WorkloadKey) -> crate::workload::CronJobReload {
        self.workloads.get(key).map(|s| s.summary.cronjob_reload).unwrap_or_default()
    }

    /// A workload's pause state.
    pub fn pause_state(&self, key: &WorkloadKey) -> Option<crate::rules::pause::PauseState> {
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

    /// The resources a workload may be reloaded for: those it uses, and those its named lists match. A list of
    /// plain names (the common case: `reload: "app-config,db"`) is looked up name by name; one with a regex entry
    /// is matched against its namespace's resources of that kind (issue 27: at M2N, scanning the namespace for
    /// every plan and status event of 6,000 named-list workloads was a tenth of the controller's CPU).
    pub(super) fn candidate_configs(&self, key: &WorkloadKey, summary: &WorkloadSummary) -> BTreeSet<ConfigKey> {
        let named = &summary.annotations;
        let mut out: BTreeSet<ConfigKey> = used(key, summary).collect();
        let exact = exactly_named(key, summary, self.cross_namespace);
        out.extend(exact.filter(|c| self.configs.get(c).is_some()));
        if named.has_pattern_list() {
            let matched = self.configs.keys_in(&key.namespace).filter(|c| {
                let selection = named.for_kind(c.kind);
                !selection.pattern_free() && selection.named.iter().any(|p| p.matches(&c.name))
            });
            out.extend(matched.cloned());
        }
        out
    }
}

/// The resources a workload uses and those its named lists of plain names name: where `referenced_by` finds it.
fn named_or_used<'a>(
    key: &'a WorkloadKey,
    summary: &'a WorkloadSummary,
    cross_namespace: bool,
) -> impl Iterator<Item = ConfigKey> + 'a {
    used(key, summary).chain(exactly_named(key, summary, cross_namespace))
}

/// The resources its pod spec uses.
fn used<'a>(key: &'a WorkloadKey, summary: &'a WorkloadSummary) -> impl Iterator<Item = ConfigKey> + 'a {
    summary.uses.iter().map(|u| ConfigKey { kind: u.kind, namespace: key.namespace.clone(), name: u.name.clone() })
}

/// The resources its named lists of plain names name (lists with a regex entry are matched instead), and those
/// of its `<namespace>/<name>` entries — naming another namespace only with `cross_namespace`
/// (`--allow-cross-namespace-references`): without it such an entry is not indexed at all (issue 38), so that
/// nothing the controller does for the workload depends on that resource.
fn exactly_named<'a>(
    key: &'a WorkloadKey,
    summary: &'a WorkloadSummary,
    cross_namespace: bool,
) -> impl Iterator<Item = ConfigKey> + 'a {
    let local = summary.annotations.named_exactly().map(|(kind, name)| ConfigKey {
        kind,
        namespace: key.namespace.clone(),
        name: name.to_owned(),
    });
    let remote = summary.annotations.remote().filter(move |(_, e)| cross_namespace || *e.namespace == *key.namespace);
    let remote =
        remote.map(|(kind, e)| ConfigKey { kind, namespace: e.namespace.as_str().into(), name: e.name.clone() });
    local.chain(remote)
}
