//! What a workload must be reloaded for now, from the index alone (no client): the decision for every
//! resource it may use, compared with the hash it was last rolled with.

use std::collections::BTreeMap;

use super::{
    ConfigFacts, ConfigKey, Index, Pair,
    applied::{applied, has_record, is_form, template_record},
};
use crate::rules::{
    decision::{DecisionSettings, ReloadDecision, ReloadReason, ResourceFacts, SkipReason, WorkloadFacts, decide},
    hash::ContentHash,
    keyprints::ChangedKeys,
    resource::{ConfigKind, env_var_name},
    strategy::{ReloadStrategy, applied_hashes_entry_len},
};
use crate::{
    constants::APPLIED_HASHES_BUDGET,
    workload::{WorkloadKey, WorkloadSummary},
};

/// One resource a workload must be reloaded for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedReload {
    /// The resource.
    pub config: ConfigKey,
    /// How the workload's records name it (`super::pair_of`: `<namespace>/<name>` from another namespace).
    pub pair: Pair,
    /// Its current hash (upstream's delete marker when it was deleted).
    pub hash: ContentHash,
    /// What the template gets for it: `hash`, or for a Secret with `--hash-key-secret` the keyed digest of it.
    pub value: ContentHash,
    /// The hash the workload was rolled with ([`ContentHash::NONE`] when it has none).
    pub previous: ContentHash,
    /// Container receiving the env var.
    pub container: String,
    /// Why.
    pub reason: ReloadReason,
    /// The resource was deleted (`--reload-on-delete`): the env-vars strategy removes its variable.
    pub deleted: bool,
    /// When its content was written, as the API server recorded it, if known ([`ConfigFacts::written_at`]).
    pub written_at: Option<jiff::Timestamp>,
    /// The keys whose change this reload applies (names only), when known; for a key-level reader, those it
    /// reads.
    pub changed_keys: Option<std::sync::Arc<crate::rules::keyprints::ChangedKeys>>,
}

/// Everything one reconcile of a workload must write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadPlan {
    /// Resources to reload for, in one rollout.
    pub reloads: Vec<PlannedReload>,
    /// The `applied-hashes` metadata record to write, when the object does not already carry it.
    pub applied_hashes: Option<BTreeMap<(ConfigKind, String), ContentHash>>,
    /// Resources left out of that record by its size budget.
    pub unrecorded: usize,
    /// The object carries a non-empty record now (a reload that cannot write the new one must clear it).
    pub object_has_record: bool,
    /// Key-level reloads: resources whose consumed keys' hash is not known yet (read them, then plan again);
    /// they are left out of this plan rather than compared by their whole content.
    pub views_needed: Vec<ConfigKey>,
}

impl WorkloadPlan {
    /// True when nothing needs writing.
    pub fn is_empty(&self) -> bool {
        self.reloads.is_empty() && self.applied_hashes.is_none()
    }
}

/// The decision for one workload (as indexed) and one resource (as indexed).
pub fn decide_pair(
    workload_namespace: &str,
    summary: &WorkloadSummary,
    config: &ConfigKey,
    facts: &ConfigFacts,
    settings: DecisionSettings,
) -> ReloadDecision {
    let workload = WorkloadFacts {
        namespace: workload_namespace,
        selection: summary.annotations.for_kind(config.kind),
        uses: &summary.uses,
        first_container: summary.first_container.as_deref(),
        ignore: summary.annotations.ignore,
    };
    let resource = ResourceFacts {
        kind: config.kind,
        namespace: &config.namespace,
        name: &config.name,
        ignored: facts.ignored,
        matched: facts.matched,
        consent: &facts.consent,
    };
    decide(&workload, &resource, settings)
}

impl Index {
    /// What `key` must be reloaded for now. Resources it does not select become its new baseline, so that
    /// selecting them later (an annotation added) does not by itself cause a rollout.
    pub fn plan(&mut self, key: &WorkloadKey, settings: DecisionSettings, strategy: ReloadStrategy) -> WorkloadPlan {
        let Some(state) = self.workloads.get(key) else { return WorkloadPlan::default() };
        let settings = self.with_namespace_rules(&key.namespace, settings);
        let configs = self.candidate_configs(key, &state.summary);
        let mut reloads = Vec::new();
        let mut baselines = Vec::new();
        let mut record = BTreeMap::new();
        let mut views_needed = Vec::new();
        for config in configs {
            let Some(facts) = self.configs.get(&config).map(|e| &e.facts) else { continue };
            let s = &state.summary;
            let pair = super::pair_of(&key.namespace, &config);
            match decide_pair(&key.namespace, s, &config, facts, settings) {
                ReloadDecision::Skip(SkipReason::NoContainer) => {}
                ReloadDecision::Skip(refused) if refused.is_cross_namespace_refusal() => {
                    // Refused (no flag, no consent): nothing about the resource goes on the object, not even into
                    // an entry the tenant planted — it would follow the content and tell whether it exists. Memory
                    // still follows, so a change made while refused is not applied once allowed.
                    baselines.push((pair, facts.hash));
                }
                ReloadDecision::Skip(_) => {
                    // Opted out (resource ignored, workload excluded, `auto: "false"`…): a change made now is
                    // never to be applied, not even later when it opts back in. Where the object records a hash
                    // for the resource, the record follows the content (a metadata write, no rollout).
                    if has_record(s, &pair) || state.unechoed.record(s).contains_key(&pair) {
                        record.insert(pair.clone(), facts.record_hash);
                    }
                    baselines.push((pair, facts.hash));
                }
                ReloadDecision::Reload { container, reason } => {
                    // Key-level: the consumed keys' view stands for the content (its hash is compared, written
                    // and recorded).
                    let reading = self.reading(state, &config, facts);
                    if reading.key_level && reading.view.is_none() {
                        views_needed.push(config);
                        if let Some(h) = state.unechoed.record(s).get(&pair) {
                            record.insert(pair, *h);
                        }
                        continue;
                    }
                    let (hash, record_hash) = match reading.view.filter(|_| reading.key_level) {
                        Some(v) => (v.hash, v.record_hash),
                        None => (facts.hash, facts.record_hash),
                    };
                    let secret = config.kind == ConfigKind::Secret && !facts.deleted;
                    let keyed = self.hash_key.as_ref().filter(|_| secret).map(|k| hash.sealed(k.bytes()));
                    // Another namespace's Secret is never written as its plain SHA-1 (issue 38): without
                    // `--hash-key-secret`, in the record's form, sealed under its UID (which the tenant cannot
                    // read): the workload shows nothing of its value that could be tested offline.
                    let unkeyed = if secret && config.namespace != key.namespace { record_hash } else { hash };
                    let forms = self.current_forms(state, &config, facts, &reading);
                    // A value of a form of the current content counts as it; the next plan rewrites the record in
                    // today's form, the template only with the next real reload.
                    let applied =
                        applied(state, &pair, Some(&container)).map(|h| if forms.contains(h) { hash } else { h });
                    let Some(previous) = applied else {
                        baselines.push((pair.clone(), hash));
                        record.insert(pair, record_hash);
                        continue;
                    };
                    // upstream v1: with env vars, a deleted resource whose variable is not on the template needs no
                    // patch; the annotations strategy writes the delete marker regardless.
                    let env = env_var_name(pair.0, &pair.1);
                    let nothing_to_remove = facts.deleted
                        && strategy == ReloadStrategy::EnvVars
                        && s.env_records.iter().all(|(_, e, _)| *e != env);
                    if previous != hash && !nothing_to_remove {
                        let changed_keys = match (reading.key_level, reading.consumed) {
                            (true, Some(read)) => self.last_changed_keys(&config, facts.hash).and_then(|c| {
                                let names: Vec<String> = c.names.iter().filter(|n| read.contains(n)).cloned().collect();
                                (!names.is_empty()).then(|| std::sync::Arc::new(ChangedKeys { names, removed: 0 }))
                            }),
                            _ => self.changed_keys(&config, facts.hash, |plain, sealed| {
                                is_form(plain, sealed, self.hash_key.as_ref(), previous)
                            }),
                        };
                        reloads.push(PlannedReload {
                            pair: pair.clone(),
                            config,
                            hash,
                            value: keyed.unwrap_or(unkeyed),
                            previous,
                            container,
                            reason,
                            deleted: facts.deleted,
                            written_at: facts.written_at(),
                            changed_keys,
                        });
                    }
                    record.insert(pair, record_hash);
                }
            }
        }
        let on_object = state.unechoed.record(&state.summary);
        // Resources of a kind whose stream has not listed (yet, or at all: forbidden) are not all known: keep
        // what the object records for them rather than erase it.
        for (pair, hash) in on_object {
            if !self.config_kind_listed(pair.0, &super::config_of(&key.namespace, pair).namespace) {
                record.entry(pair.clone()).or_insert(*hash);
            }
        }
        let (record, unrecorded) = within_budget(record, &state.summary);
        let applied_hashes = (!on_object.same_as(&record)).then_some(record);
        let object_has_record = !on_object.is_empty();
        let mut plan = WorkloadPlan { reloads, applied_hashes, unrecorded, object_has_record, views_needed };
        if state.rejected.as_ref().is_some_and(|r| *r == reload_set(&plan)) {
            // The same write was rejected permanently already: wait for something to change.
            plan = WorkloadPlan::default();
        }
        if let Some(state) = self.workloads.get_mut(key) {
            state.baselines.extend(baselines);
        }
        plan
    }

    /// Remembers what a successful write put on the object, until the watch shows it.
    pub fn mark_written(&mut self, key: &WorkloadKey, plan: &WorkloadPlan) {
        if let Some(state) = self.workloads.get_mut(key) {
            state.rejected = None;
            state.unechoed.wrote(&state.summary, plan);
            for r in &plan.reloads {
                state.baselines.insert(r.pair.clone(), r.hash);
            }
        }
    }
}

/// The record cut to [`APPLIED_HASHES_BUDGET`], and how many entries were left out. Kept first: resources with
/// no other memory on the object (no `STAKATER_*`/`last-reloaded-from` record), then those the pod spec uses,
/// then by name — a fixed order, so the same inputs always give the same record (no rewrite loops).
fn within_budget(
    record: BTreeMap<Pair, ContentHash>,
    summary: &WorkloadSummary,
) -> (BTreeMap<Pair, ContentHash>, usize) {
    let total: usize = 2 + record.keys().map(applied_hashes_entry_len).sum::<usize>();
    if total <= APPLIED_HASHES_BUDGET {
        return (record, 0);
    }
    let mut entries: Vec<(Pair, ContentHash)> = record.into_iter().collect();
    entries.sort_by_cached_key(|(pair, _)| {
        let recorded = template_record(summary, pair, None).is_some();
        let used = summary.uses.iter().any(|u| u.kind == pair.0 && u.name == pair.1);
        (recorded, !used, pair.clone())
    });
    let (mut kept, mut size, mut left_out) = (BTreeMap::new(), 2, 0);
    for (pair, hash) in entries {
        let len = applied_hashes_entry_len(&pair);
        if size + len <= APPLIED_HASHES_BUDGET {
            size += len;
            kept.insert(pair, hash);
        } else {
            left_out += 1;
        }
    }
    (kept, left_out)
}

/// The resources and hashes a plan reloads for (what a rejection is remembered by).
pub(super) fn reload_set(plan: &WorkloadPlan) -> Vec<(Pair, ContentHash)> {
    plan.reloads.iter().map(|r| (r.pair.clone(), r.hash)).collect()
}
