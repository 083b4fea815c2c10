//! The facts rollout gates (`crate::rules::gates`) need from the index: for each resource a workload is about to be
//! reloaded for, the other workloads that reload for it, their waves and rollouts, and whether they already run
//! its current content. Read from the index alone, so the answer is the same after a restart (level-triggered:
//! a held change stays held while the failed workload stays failed and records that content).

use std::collections::HashSet;

use super::{ConfigKey, Index, PlannedReload, WorkloadState, applied, decide_pair};
use crate::rules::{
    decision::{DecisionSettings, NamespaceRules, ReloadDecision},
    gates::{Change, Peer, hold_id},
};
use crate::workload::{RolloutState, WorkloadKey};

impl Index {
    /// A workload's rollout gates (issue 17); without a window of its own, its namespace's; and whether its
    /// namespace pauses it.
    pub fn workload_gates(&self, key: &WorkloadKey) -> Option<crate::rules::gates::RolloutGates> {
        let mut gates = self.workloads.get(key).map(|s| s.summary.annotations.gates.clone())?;
        if gates.window.is_none() {
            gates.window = self.namespace_windows.get(&*key.namespace).cloned();
        }
        gates.namespace_paused = self.namespace_rules(&key.namespace).pause;
        Some(gates)
    }

    /// A namespace's rules (`--namespace-rules`; none set when not watched).
    pub fn namespace_rules(&self, namespace: &str) -> NamespaceRules {
        self.namespace_rules.get(namespace).copied().unwrap_or_default()
    }

    /// `settings` for a workload in `namespace`: with its namespace's rules.
    pub fn with_namespace_rules(&self, namespace: &str, settings: DecisionSettings) -> DecisionSettings {
        DecisionSettings { namespace: self.namespace_rules(namespace), ..settings }
    }

    /// Sets a namespace's rules; the ones it had before when they changed.
    pub fn set_namespace_rules(&mut self, namespace: &str, rules: NamespaceRules) -> Option<NamespaceRules> {
        let old = self.namespace_rules(namespace);
        if rules.is_default() {
            self.namespace_rules.remove(namespace);
        } else {
            self.namespace_rules.insert(namespace.to_owned(), rules);
        }
        (old != rules).then_some(old)
    }

    /// Sets (or with `None` clears) a namespace's reload window; true when it changed.
    pub fn set_namespace_window(
        &mut self,
        namespace: &str,
        window: Option<crate::rules::window::ReloadWindow>,
    ) -> bool {
        match window {
            Some(w) => self.namespace_windows.insert(namespace.to_owned(), w.clone()).is_none_or(|old| old != w),
            None => self.namespace_windows.remove(namespace).is_some(),
        }
    }

    /// Forgets the windows and rules of namespaces a relist no longer showed.
    pub fn retain_namespaces(&mut self, namespaces: &HashSet<String>) {
        self.namespace_windows.retain(|ns, _| namespaces.contains(ns));
        self.namespace_rules.retain(|ns, _| namespaces.contains(ns));
    }

    /// Its rollout and the generation it is of, as its status last said.
    pub fn rollout(&self, key: &WorkloadKey) -> Option<(crate::workload::RolloutState, i64)> {
        self.workloads.get(key).map(|s| (s.summary.rollout, s.summary.generation))
    }

    /// Workloads whose status shows a rollout in progress, with their generation (a new leader counts them
    /// in its budget), and those with pods still to restart (`evict-pods`: counted until the last one is, so
    /// with a generation that never comes).
    pub fn rollouts_in_progress(&self) -> Vec<(WorkloadKey, i64)> {
        let rolling = self.workloads.iter().filter(|(_, s)| {
            // Untracked kinds and objects (CronJobs, OnDelete, paused by a user) are never `InProgress`.
            // Template rollouts only when this controller wrote the spec last (issue 38: a user's deploy in progress
            // at a start took a slot it never gave back before the deploy completed); pod restarts are always ours.
            (s.summary.rollout == crate::workload::RolloutState::InProgress && s.summary.spec_written_last_by_us)
                || s.summary.restart_pods_before.is_some()
        });
        let awaited = |s: &WorkloadState| match s.summary.restart_pods_before {
            Some(_) => i64::MAX,
            None => s.summary.generation,
        };
        rolling.map(|(k, s)| (k.clone(), awaited(s))).collect()
    }

    /// The gates' view of `reloads` of `key`. `timed_out` tells the rollouts that passed `--rollout-timeout`
    /// (counted as failed: kinds without a deadline condition fail by the controller's clock). Peers are of `key`'s
    /// namespace only (issue 38): through a `<namespace>/<name>` entry a tenant's paused, failing or low-wave
    /// workload would otherwise hold another namespace's rollouts.
    pub fn gate_changes(
        &self,
        key: &WorkloadKey,
        reloads: &[PlannedReload],
        settings: DecisionSettings,
        timed_out: impl Fn(&WorkloadKey) -> bool,
    ) -> Vec<Change> {
        reloads
            .iter()
            .filter_map(|r| {
                let facts = self.configs.get(&r.config).map(|e| &e.facts)?;
                let peers = self
                    .candidates(&r.config)
                    .into_iter()
                    .filter(|w| w != key && w.namespace == key.namespace)
                    .filter_map(|w| {
                        let state = self.workloads.get(&w)?;
                        let settings = self.with_namespace_rules(&w.namespace, settings);
                        let decision = decide_pair(&w.namespace, &state.summary, &r.config, facts, settings);
                        // A peer whose write of this content was rejected for good (an admission denial) will never
                        // run it: it must not hold a wave back.
                        let pair = super::pair_of(&w.namespace, &r.config);
                        let rejected = state.rejected.as_ref().is_some_and(|set| set.contains(&(pair, facts.hash)));
                        if !matches!(decision, ReloadDecision::Reload { .. }) || rejected {
                            return None;
                        }
                        let rollout = if timed_out(&w) { RolloutState::Failed } else { state.summary.rollout };
                        let runs_current = self.runs_current(&w.namespace, state, &r.config);
                        Some(Peer { wave: state.summary.annotations.gates.wave, rollout, runs_current, key: w })
                    })
                    .collect();
                let (hold_id, released) = (hold_id(&facts.record_hash), facts.released);
                Some(Change { resource: r.config.clone(), hold_id, released, peers })
            })
            .collect()
    }

    /// Whether a workload was last rolled (or recorded) with `config`'s current content, as a plan compares it.
    /// Nothing known counts as current: a workload the index knows nothing about must not block a wave.
    fn runs_current(&self, namespace: &str, state: &WorkloadState, config: &ConfigKey) -> bool {
        let Some(facts) = self.configs.get(config).map(|e| &e.facts) else { return true };
        let reading = self.reading(state, config, facts);
        let forms = self.current_forms(state, config, facts, &reading);
        applied::applied(state, &super::pair_of(namespace, config), None).is_none_or(|h| forms.contains(h))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{NS, cm, deployment, full_plan};
    use super::*;
    use crate::index::Baseline;
    use crate::rules::gates::Wait;

    fn wave(name: &str, wave: &str) -> (WorkloadKey, crate::workload::WorkloadSummary) {
        deployment(
            name,
            json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-wave": wave}),
            json!([]),
        )
    }

    #[test]
    fn a_higher_wave_waits_for_a_pending_lower_one_unless_its_write_was_rejected_for_good() {
        let mut index = Index::default();
        let (db, db_summary) = wave("db", "0");
        let (web, web_summary) = wave("web", "1");
        let (ck, v1) = cm("cfg", "v1");
        index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
        index.upsert_workload(db.clone(), db_summary, Baseline::Current);
        index.upsert_workload(web.clone(), web_summary, Baseline::Current);
        let (_, v2) = cm("cfg", "v2");
        index.upsert_config(ck.clone(), v2.clone(), Baseline::Current);
        let db_plan = full_plan(&mut index, &db);
        let web_plan = full_plan(&mut index, &web);
        assert_eq!(web_plan.reloads.len(), 1);
        let settings = DecisionSettings::default();
        let gates = index.workload_gates(&web).expect("gates");
        let now = jiff::Timestamp::UNIX_EPOCH;
        let changes = index.gate_changes(&web, &web_plan.reloads, settings, |_| false);
        assert_eq!(changes[0].peers.iter().map(|p| p.key.name.as_str()).collect::<Vec<_>>(), ["db"]);
        let wait = crate::rules::gates::gate(&gates, false, &changes, now);
        assert!(matches!(wait, Some(Wait::Wave { behind: (ref k, 0), .. }) if *k == db), "{wait:?}");
        // db written: it runs the content; its rollout in progress still holds web back.
        index.mark_written(&db, &db_plan);
        let changes = index.gate_changes(&web, &web_plan.reloads, settings, |_| false);
        assert!(changes[0].peers[0].runs_current);
        // Rejected for good instead: never current, and no longer a peer.
        let mut index2 = Index::default();
        let (db2, s) = wave("db", "0");
        let (_, w) = wave("web", "1");
        index2.upsert_config(ck.clone(), v1, Baseline::Current);
        index2.upsert_workload(db2.clone(), s, Baseline::Current);
        index2.upsert_workload(web.clone(), w, Baseline::Current);
        index2.upsert_config(ck, v2, Baseline::Current);
        let rejected_plan = full_plan(&mut index2, &db2);
        index2.mark_rejected(&db2, &rejected_plan);
        let changes = index2.gate_changes(&web, &web_plan.reloads, settings, |_| false);
        assert!(changes[0].peers.is_empty(), "{changes:?}");
        assert_eq!(crate::rules::gates::gate(&gates, false, &changes, now), None);
        assert_eq!(&*db2.namespace, NS);
    }
}
