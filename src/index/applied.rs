//! What a workload was last rolled with, for one resource: the one answer plans, gates and `explain` read.
//!
//! The cluster holds it (design.md, "One owner per concern: applied state"): the `applied-hashes` record on the
//! workload's metadata, written with every reload, when a workload is first seen and while it opts out, so a
//! restarted or newly elected controller knows it too. Memory only covers what the object cannot show yet or
//! cannot show at all, and [`applied`] reads the sources in this order of trust:
//!
//! 1. [`Unechoed`]: what our last write put on the object, until the watch shows it. The PATCH answer races the
//!    watch event; a plan in between would otherwise read the object from before the write and write again.
//! 2. The record on the object.
//! 3. The pod template's `STAKATER_*` env var or `last-reloaded-from` annotation: upstream's only memory. It
//!    seeds a missing record (taking over from upstream: the first plan writes the record from it), and it is all
//!    there is where the record may not be written (record-less mode under upstream's RBAC) or was cut by its size
//!    budget.
//! 4. The baseline (`WorkloadState::baselines`), for a resource the object records nothing of: the content it
//!    had when workload and resource were first seen together (upstream: a creation does not reload), nothing
//!    under `--reload-on-create` / `--sync-after-restart`, or what we wrote last (record-less mode).
//!
//! The value found is compared with [`CurrentForms`], every form the current content takes on an object.

use std::collections::HashMap;

use super::{ConfigFacts, ConfigKey, Index, KeyView, Pair, WorkloadPlan, WorkloadState};
use crate::rules::{hash::ContentHash, references::KeySet, resource::env_var_name};
use crate::{
    hash_key::HashKey,
    workload::{HashRecord, WorkloadSummary},
};

/// What our last successful write put on a workload, until the watch shows it on the object.
#[derive(Debug, Default)]
pub(super) struct Unechoed {
    /// Template values (`STAKATER_*` env var or `last-reloaded-from`), per resource.
    template: HashMap<Pair, ContentHash>,
    /// The `applied-hashes` record.
    record: Option<HashRecord>,
}

impl Unechoed {
    /// Notes what a write of `plan` put on the object shown by `summary`. The watch may have delivered the write
    /// already (its event races the PATCH answer): what the object shows is not held — no further event would
    /// clear it.
    pub(super) fn wrote(&mut self, summary: &WorkloadSummary, plan: &WorkloadPlan) {
        for r in &plan.reloads {
            let pair = r.pair.clone();
            if template_record(summary, &pair, None) != Some(r.value) {
                self.template.insert(pair, r.value);
            }
        }
        if let Some(hashes) = &plan.applied_hashes {
            let written: HashRecord = hashes.into();
            if summary.applied_hashes != written {
                self.record = Some(written);
            }
        }
    }

    /// Forgets what the object (a new version of it from the watch) now shows.
    pub(super) fn echoed(&mut self, summary: &WorkloadSummary) {
        self.template.retain(|pair, hash| template_record(summary, pair, None) != Some(*hash));
        if self.record.as_ref() == Some(&summary.applied_hashes) {
            self.record = None;
        }
    }

    /// The record as the object shows it once our write is echoed.
    pub(super) fn record<'a>(&'a self, summary: &'a WorkloadSummary) -> &'a HashRecord {
        self.record.as_ref().unwrap_or(&summary.applied_hashes)
    }

    /// Keeps only the template values of the resources `keep` accepts.
    pub(super) fn retain(&mut self, keep: impl Fn(&Pair) -> bool) {
        self.template.retain(|pair, _| keep(pair));
    }

    /// Forgets the template value written for `pair`.
    pub(super) fn forget(&mut self, pair: &Pair) {
        self.template.remove(pair);
    }

    /// How many template values it holds (`reloader_index_objects{type="unechoed"}`; a record, at most one per
    /// workload, is bounded by `workloads`).
    pub(super) fn len(&self) -> usize {
        self.template.len()
    }
}

/// What `state`'s workload was last rolled with for `pair`, in `container` when known (see the module header),
/// or `None` when nothing is known.
pub(super) fn applied(state: &WorkloadState, pair: &Pair, container: Option<&str>) -> Option<ContentHash> {
    let record = state.unechoed.record(&state.summary);
    state
        .unechoed
        .template
        .get(pair)
        .or_else(|| record.get(pair))
        .copied()
        .or_else(|| template_record(&state.summary, pair, container))
        .or_else(|| state.baselines.get(pair).copied())
}

/// True when the object itself records a hash for `pair` (template or metadata).
pub(super) fn has_record(summary: &WorkloadSummary, pair: &Pair) -> bool {
    template_record(summary, pair, None).is_some() || summary.applied_hashes.contains_key(pair)
}

/// The hash a workload's pod template records for a resource: its `STAKATER_*` env var (in `container` when
/// known, else in any container), else a `last-reloaded-from` annotation naming it.
pub(super) fn template_record(
    summary: &WorkloadSummary,
    (kind, name): &Pair,
    container: Option<&str>,
) -> Option<ContentHash> {
    let env = env_var_name(*kind, name);
    let ambiguous = summary.ambiguous_env.contains(&env);
    let in_container = |c: Option<&str>| {
        let found = summary.env_records.iter().find(|(cn, en, _)| *en == env && c.is_none_or(|c| c == cn));
        found.filter(|_| !ambiguous).map(|(_, _, h)| *h)
    };
    in_container(container)
        .or_else(|| in_container(None))
        .or_else(|| summary.annotation_record.as_ref().filter(|(k, n, _)| k == kind && n == name).map(|(_, _, h)| *h))
}

/// Every form the current content of one resource takes on an object: the plain hash (upstream's, and ours
/// before `--hash-key-secret` was set), the record's form (sealed under the Secret's UID, and under a re-created
/// Secret's former UID), the keyed form (also under the former key) — of the whole content and, for a workload
/// that reads some keys, of the view of those keys.
///
/// Recognised when compared rather than stored when the resource arrives: three more hashes per resource would
/// cost about 5 MB at M2's 80,000 resources, and the next plan rewrites a record value of an older form in
/// today's form anyway (the template only with the next real reload).
pub(super) struct CurrentForms<'a> {
    hash: ContentHash,
    record_hash: ContentHash,
    /// The view of the keys the workload reads, where it stands for the content.
    view: Option<&'a KeyView>,
    /// The record form under a deleted and re-created Secret's former UID.
    departed: Option<ContentHash>,
    key: Option<&'a HashKey>,
}

impl CurrentForms<'_> {
    /// Whether `value`, found on an object, stands for the current content.
    pub(super) fn contains(&self, value: ContentHash) -> bool {
        is_form(self.hash, self.record_hash, self.key, value)
            || self.view.is_some_and(|v| is_form(v.hash, v.record_hash, self.key, value))
            || self.departed == Some(value)
    }
}

/// Whether `value` is a form of the content whose plain hash is `plain` and record form `sealed`.
pub(super) fn is_form(plain: ContentHash, sealed: ContentHash, key: Option<&HashKey>, value: ContentHash) -> bool {
    value == plain
        || value == sealed
        || key.is_some_and(|k| value == plain.sealed(k.bytes()))
        || key.and_then(HashKey::previous).is_some_and(|p| value == plain.sealed(p))
}

/// How a workload reads one resource, for comparing.
pub(super) struct Reading<'a> {
    /// The keys it reads, when it reads some only.
    pub(super) consumed: Option<&'a KeySet>,
    /// The current view of those keys, when known.
    pub(super) view: Option<&'a KeyView>,
    /// Reloaded for those keys only (`--reload-on=keys-used` / `reload-on` annotation, resource not deleted).
    pub(super) key_level: bool,
}

impl Index {
    /// How `state`'s workload reads `config`.
    pub(super) fn reading<'a>(
        &'a self,
        state: &'a WorkloadState,
        config: &ConfigKey,
        facts: &ConfigFacts,
    ) -> Reading<'a> {
        let s = &state.summary;
        let consumed = s.uses.iter().find(|u| u.kind == config.kind && u.name == config.name);
        let consumed = consumed.and_then(|u| u.keys.as_ref());
        // A view of the keys is also recognised when the workload has just opted out.
        let view = consumed.and_then(|k| self.views.get(config)?.iter().find(|v| v.keys == *k));
        let key_level = consumed.is_some() && self.key_level(s) && !facts.deleted;
        Reading { consumed, view, key_level }
    }

    /// The forms of `config`'s current content that count for `state`'s workload reading it as `reading` says.
    pub(super) fn current_forms<'a>(
        &'a self,
        state: &WorkloadState,
        config: &ConfigKey,
        facts: &ConfigFacts,
        reading: &Reading<'a>,
    ) -> CurrentForms<'a> {
        CurrentForms {
            hash: facts.hash,
            record_hash: facts.record_hash,
            view: reading.view.filter(|_| reading.key_level || state.left_key_level),
            departed: self.departed_record(config, facts.hash),
            key: self.hash_key.as_ref(),
        }
    }
}
