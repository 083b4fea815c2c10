//! The workload kinds that get reloaded. Each kind lives in its own file and implements [`WorkloadObject`]; [`kinds`]
//! is the one table from a kind to its type, which answers the kind's facts and how it is written (adding a kind: its
//! file, its name in [`WorkloadKind`], one line there). The files are layered, no file needing one above it: `patch.rs`
//! (what a write is, the patch bodies and requests the writes share), [`rollout`] (whether a rollout is complete) and
//! `owed_jobs.rs` at the bottom; the kind files on them; [`kinds`] above the kind files; `write.rs`, `confirm.rs`,
//! `pods.rs` and `list.rs` on top, reaching a kind only through [`kinds`].

pub mod configured;
mod confirm;
mod cronjob;
pub mod custom;
mod daemonset;
mod deployment;
mod job;
pub mod kinds;
mod lean;
mod list;
mod owed_jobs;
mod patch;
mod pods;
mod record;
pub mod rollout;
mod statefulset;
#[cfg(test)]
mod test_support;
mod write;

use std::{collections::BTreeMap, fmt};

pub use confirm::landed;
pub use cronjob::spawns_nothing;
pub use job::{Resumed, resume};
pub use lean::Lean;
pub use list::list_summaries;
pub use owed_jobs::{CreateRefusal, Dropped, OwedJobs, create_refusal};
pub use patch::{CronJobReload, WorkloadWrite, WriteStyle};
pub use pods::{
    PodReferences, PodTarget, clear_pod_restart, is_owned, pod_owners, pod_target, pod_uses, record_pod_count,
};
pub use record::HashRecord;
pub use write::write;

pub use crate::rules::keys::{KindFacts, RolloutState, Watched, WorkloadKey, WorkloadKind};

use k8s_openapi::{
    NamespaceResourceScope, api::core::v1::PodTemplateSpec, apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::rules::{
    annotations::{AnnotationKeys, WorkloadAnnotations},
    hash::ContentHash,
    pause::PauseState,
    references::{ConfigUse, config_uses},
    resource::{ConfigKind, env_var_name},
    strategy::{RolloutStrategy, parse_applied_hashes, parse_last_reloaded_from},
    values::WorkloadProblem,
};

/// A typed workload object the controller watches.
pub trait WorkloadObject:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Its kind.
    const KIND: WorkloadKind;
    /// How a reload is written into it.
    const WRITE: WriteStyle = WriteStyle::TemplatePatch;
    /// Its `spec` type.
    type Spec: DeserializeOwned + Send + Sync + 'static;
    /// Its `status` type.
    type Status: DeserializeOwned + Send + Sync + 'static;

    /// What the kind is and how the rules treat it: the kind table answers [`WorkloadKind::facts`] with these.
    fn facts() -> KindFacts;

    /// The names `reloader explain` takes for the kind ([`KindFacts::names`]; a configured kind is named by its
    /// registration's rule).
    fn named(name: &str) -> bool {
        Self::facts().names.contains(&name)
    }

    /// The object from its parts ([`Lean`] decodes them without `managedFields`).
    fn from_parts(metadata: ObjectMeta, spec: Option<Self::Spec>, status: Option<Self::Status>) -> Self;

    /// Its pod template.
    fn pod_template(&self) -> Option<&PodTemplateSpec>;

    /// The kind's own switch that stops it: `spec.paused` (Deployments), `spec.suspend` (CronJobs).
    fn paused(&self) -> bool {
        false
    }

    /// Whether its current rollout is complete (kinds whose rollouts are tracked).
    fn rollout(&self) -> RolloutState {
        RolloutState::Untracked
    }

    /// Where its pod template is, as a JSON pointer (kinds written as JSON: `WriteStyle::MergePatch`).
    fn template_pointer() -> &'static str {
        "/spec/template"
    }

    /// A template `metadata.name` names a revision, and a changed template needs a new one (Knative Services).
    fn named_revisions() -> bool {
        false
    }
}

/// What the index remembers about a workload: no pod spec, only what decisions and idempotence need.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSummary {
    /// Object UID (a recreated workload is a new one).
    pub uid: String,
    /// Selecting annotations.
    pub annotations: WorkloadAnnotations,
    /// Resources the pod spec uses.
    pub uses: Vec<ConfigUse>,
    /// First container name.
    pub first_container: Option<String>,
    /// `STAKATER_*` env vars found on the template: (container, env name, hash).
    pub env_records: Vec<(String, String, ContentHash)>,
    /// The `last-reloaded-from` record, if any.
    pub annotation_record: Option<(ConfigKind, String, ContentHash)>,
    /// The `applied-hashes` metadata record.
    pub applied_hashes: HashRecord,
    /// Pause state (Deployments; `period` is read on every kind only to report it).
    pub pause: PauseState,
    /// `reloader.stakater.com/rollout-strategy` on its metadata, when valid (`--rollout-strategy` otherwise).
    pub rollout_strategy: Option<RolloutStrategy>,
    /// `reloader.stakater.com/cronjob-reload` (CronJobs).
    pub cronjob_reload: CronJobReload,
    /// `restart-pods-created-before`: its pods created before this are still to restart (`evict-pods`,
    /// `delete-pods`).
    pub restart_pods_before: Option<crate::rules::pod_restarts::Boundary>,
    /// `STAKATER_*` names shared by several resources (`a-b`, `a.b`): their env values cannot tell which
    /// resource they record, so only the metadata record counts for them.
    pub ambiguous_env: Vec<String>,
    /// Its rollout, from its status (the restart budget).
    pub rollout: RolloutState,
    /// `metadata.generation`: a rollout is of the generation a write produced (the restart budget).
    pub generation: i64,
    /// Whether this controller wrote the `spec` last, by the API server's `managedFields` times (a tie counts as
    /// this controller's): a rollout in progress at a start is counted in the restart budget only then.
    pub spec_written_last_by_us: bool,
}

impl WorkloadSummary {
    /// Whether `self` and `other` are equal but for their rollout (state, generation, who wrote the spec last) and, with `but_record`, their
    /// `applied-hashes` records — compared in place (those fields are set aside and put back), because a clone of
    /// a summary per workload watch event cost dozens of allocations.
    pub fn equal_but(&mut self, other: &mut Self, but_record: bool) -> bool {
        let rollout = std::mem::replace(&mut self.rollout, other.rollout);
        let generation = std::mem::replace(&mut self.generation, other.generation);
        let ours = std::mem::replace(&mut self.spec_written_last_by_us, other.spec_written_last_by_us);
        let records =
            but_record.then(|| (std::mem::take(&mut self.applied_hashes), std::mem::take(&mut other.applied_hashes)));
        let equal = self == other;
        self.rollout = rollout;
        self.generation = generation;
        self.spec_written_last_by_us = ours;
        if let Some((mine, theirs)) = records {
            self.applied_hashes = mine;
            other.applied_hashes = theirs;
        }
        equal
    }
}

/// Summarises a workload object for the index.
pub fn summarise<K: WorkloadObject>(obj: &K, keys: &AnnotationKeys) -> Option<(WorkloadKey, WorkloadSummary)> {
    let namespace = obj.namespace()?;
    let template = obj.pod_template();
    let spec = template.and_then(|t| t.spec.as_ref());
    let template_annotations = template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.as_ref());
    let env_records = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| {
            c.env.iter().flatten().filter_map(move |e| {
                let value = e.value.as_deref()?;
                if !e.name.starts_with(crate::constants::ENV_VAR_PREFIX) {
                    return None;
                }
                Some((c.name.clone(), e.name.clone(), ContentHash::parse_hex(value)?))
            })
        })
        .collect();
    let annotation_record = template_annotations
        .and_then(|a| a.get(crate::constants::annotation::LAST_RELOADED_FROM))
        .and_then(|v| parse_last_reloaded_from(v));
    let uses = spec.map(config_uses).unwrap_or_default();
    let metadata_annotations = obj.meta().annotations.as_ref();
    let mut annotations = WorkloadAnnotations::extract(keys, metadata_annotations, template_annotations);
    let collisions = env_name_collisions(&uses);
    let ambiguous_env = collisions.iter().map(|p| p.key.clone()).collect();
    annotations.problems.extend(collisions);
    let pause = PauseState {
        paused: obj.paused(),
        paused_at: metadata_annotations.and_then(|a| a.get(&keys.paused_at)).cloned(),
        period: metadata_annotations.and_then(|a| a.get(&keys.pause_period)).cloned(),
    };
    annotations.problems.extend(pause_problem::<K>(&keys.pause_period, pause.period.as_deref()));
    let strategy_value = metadata_annotations.and_then(|a| a.get(crate::constants::annotation::ROLLOUT_STRATEGY));
    let rollout_strategy = strategy_value.and_then(|v| RolloutStrategy::parse(v));
    if let (Some(value), None) = (strategy_value, rollout_strategy) {
        annotations.problems.push(WorkloadProblem {
            key: crate::constants::annotation::ROLLOUT_STRATEGY.to_owned(),
            value: value.clone(),
            message: format!(
                "annotation {:?}: {value:?} is not a rollout strategy (rollout, restart, evict-pods, delete-pods); \
                 --rollout-strategy applies",
                crate::constants::annotation::ROLLOUT_STRATEGY
            ),
        });
    }
    let cronjob_value = metadata_annotations.and_then(|a| a.get(crate::constants::annotation::CRONJOB_RELOAD));
    let (cronjob_reload, problem) =
        CronJobReload::from_annotation(K::facts().cronjob_reload, cronjob_value.map(String::as_str));
    annotations.problems.extend(problem);
    let restart_pods_before = metadata_annotations
        .and_then(|a| a.get(crate::constants::annotation::RESTART_PODS_CREATED_BEFORE))
        .and_then(|v| crate::rules::pod_restarts::Boundary::parse(v));
    // Paused by a user (`kubectl rollout pause`), it rolls nothing until they resume it: not tracked meanwhile, so a
    // template write to it takes no restart-budget slot, never counts as failed for the health gate, and holds no
    // wave. Paused by `pause-period` (`paused-at` set) it is tracked: the controller resumes it, and it rolls then.
    let rollout = if pause.paused && pause.paused_at.is_none() { RolloutState::Untracked } else { obj.rollout() };
    let summary = WorkloadSummary {
        uid: obj.meta().uid.clone().unwrap_or_default(),
        annotations,
        uses,
        first_container: spec.and_then(|s| s.containers.first()).map(|c| c.name.clone()),
        env_records,
        annotation_record,
        applied_hashes: obj
            .meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::constants::annotation::APPLIED_HASHES))
            .map(|v| parse_applied_hashes(v).into())
            .unwrap_or_default(),
        pause,
        rollout_strategy,
        cronjob_reload,
        restart_pods_before,
        ambiguous_env,
        rollout,
        generation: obj.meta().generation.unwrap_or(0),
        spec_written_last_by_us: spec_written_last_by_us(obj.meta()),
    };
    Some((WorkloadKey { kind: K::KIND, namespace: namespace.into(), name: obj.name_any() }, summary))
}

/// Whether, of the managers that own part of the object's `spec` ([`Lean`] keeps only those), this controller's
/// wrote last. Times are whole seconds: a tie counts as this controller's (the budget then counts a rollout too
/// many, never one too few). A record-only write moves its time too: a user's template change followed by a record
/// of ours counts as ours — as every rollout in progress did before this rule.
fn spec_written_last_by_us(meta: &ObjectMeta) -> bool {
    // Lean metadata holds only the spec's writers; a fully decoded object (explain) holds every entry.
    let owns_spec = |e: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        e.subresource.as_deref().is_none_or(str::is_empty)
            && e.fields_v1.as_ref().is_none_or(|f| f.0.get("f:spec").is_some())
    };
    let writers = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(owns_spec)
        .filter_map(|e| Some((e.time.as_ref()?.0, e.manager.as_deref()?)));
    let ours = writers.clone().filter(|(_, m)| *m == crate::constants::FIELD_MANAGER).map(|(t, _)| t).max();
    let others = writers.filter(|(_, m)| *m != crate::constants::FIELD_MANAGER).map(|(t, _)| t).max();
    match (ours, others) {
        (Some(ours), Some(others)) => ours >= others,
        (ours, _) => ours.is_some(),
    }
}

/// upstream v1 warns when the pause period is on another kind; an invalid duration is reported (the reload
/// still happens, without a pause) instead of blocking reloads or pausing forever.
fn pause_problem<K: WorkloadObject>(key: &str, period: Option<&str>) -> Option<WorkloadProblem> {
    let period = period?;
    let message = if !K::facts().pause_period {
        format!("Annotation '{key}' only applicable for deployments")
    } else {
        let e = crate::rules::duration::parse_go_duration(period).err()?;
        format!("annotation {key:?}: {e}; reloads happen without pausing")
    };
    Some(WorkloadProblem { key: key.to_owned(), value: period.to_owned(), message })
}

/// Resources of one kind whose names sanitise to the same `STAKATER_*` name (`a-b` and `a.b`): upstream
/// silently lets their reloads overwrite one value; we keep that behaviour but say so.
fn env_name_collisions(uses: &[ConfigUse]) -> Vec<WorkloadProblem> {
    let mut by_env: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for u in uses {
        by_env.entry(env_var_name(u.kind, &u.name)).or_default().push(&u.name);
    }
    by_env
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(env, names)| WorkloadProblem {
            message: format!("resources {names:?} share the env var name {env}; their reloads write the same variable"),
            value: names.join(", "),
            key: env,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::annotation::ROLLOUT_STRATEGY;
    use k8s_openapi::api::apps::v1::Deployment;

    #[test]
    fn summaries_keep_references_records_and_report_env_name_collisions() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{
                "name": "app",
                "envFrom": [{"configMapRef": {"name": "a-b"}}, {"configMapRef": {"name": "a.b"}}],
                "env": [{"name": "STAKATER_A_B_CONFIGMAP", "value": "dc30e0faa89a70dec1033016a2309bbeb9efcbd0"},
                        {"name": "STAKATER_NOT_A_HASH", "value": "x"}, {"name": "OTHER", "value": "y"}]
            }]}}}
        }))
        .expect("deployment");
        let (key, s) = summarise(&d, &AnnotationKeys::default()).expect("summary");
        assert_eq!(key.to_string(), "Deployment ns/web");
        assert_eq!(s.uses.len(), 2);
        assert_eq!(s.env_records.len(), 1, "only STAKATER_* values that are hashes are records");
        let p = &s.annotations.problems;
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].key.as_str(), p[0].value.as_str()), ("STAKATER_A_B_CONFIGMAP", "a-b, a.b"));
    }

    #[test]
    fn a_deployment_paused_by_a_user_is_not_tracked_one_paused_by_pause_period_is() {
        let rollout = |annotations: serde_json::Value| {
            let d: Deployment = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "ns", "generation": 2, "annotations": annotations},
                "spec": {"paused": true, "replicas": 1, "selector": {}, "template": {"spec": {"containers": []}}},
                "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}
            }))
            .expect("deployment");
            summarise(&d, &AnnotationKeys::default()).expect("summary").1.rollout
        };
        assert_eq!(rollout(serde_json::json!({})), RolloutState::Untracked, "kubectl rollout pause");
        let ours = serde_json::json!({"deployment.reloader.stakater.com/paused-at": "2026-12-05T10:00:00Z"});
        assert_eq!(rollout(ours), RolloutState::InProgress, "pause-period: resumed by the controller");
    }

    #[test]
    fn the_rollout_strategy_annotation_is_read_on_every_kind_and_a_bad_value_is_reported() {
        let strategy = |value: &str| {
            let d: Deployment = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "ns", "annotations": {ROLLOUT_STRATEGY: value}},
                "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app"}]}}}
            }))
            .expect("deployment");
            let (_, s) = summarise(&d, &AnnotationKeys::default()).expect("summary");
            (s.rollout_strategy, s.annotations.problems.into_iter().map(|p| p.message).collect::<Vec<_>>())
        };
        assert_eq!(strategy("restart"), (Some(RolloutStrategy::Restart), vec![]));
        assert_eq!(strategy("rollout"), (Some(RolloutStrategy::Rollout), vec![]));
        assert_eq!(
            strategy("recreate"),
            (
                None,
                vec![
                    "annotation \"reloader.stakater.com/rollout-strategy\": \"recreate\" is not a rollout strategy \
                     (rollout, restart, evict-pods, delete-pods); --rollout-strategy applies"
                        .to_owned()
                ]
            )
        );
    }

    #[test]
    fn equal_but_sets_aside_only_the_rollout_and_the_record_and_puts_them_back() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app"}]}}}
        }))
        .expect("deployment");
        let (_, base) = summarise(&d, &AnnotationKeys::default()).expect("summary");
        let record = BTreeMap::from([((ConfigKind::ConfigMap, "cfg".to_owned()), ContentHash::NONE)]);
        let mut rolled =
            WorkloadSummary { rollout: RolloutState::InProgress, spec_written_last_by_us: true, ..base.clone() };
        let mut recorded = WorkloadSummary { applied_hashes: record.clone().into(), ..rolled.clone() };
        let mut renamed = WorkloadSummary { uid: "u2".into(), ..rolled.clone() };
        let mut old = base.clone();
        assert!(old.equal_but(&mut rolled, false), "only the rollout differs");
        assert!(!old.equal_but(&mut recorded, false), "the record differs too");
        assert!(old.equal_but(&mut recorded, true), "rollout and record set aside");
        assert!(!old.equal_but(&mut renamed, true), "anything else counts");
        assert_eq!(old, base, "put back");
        assert!(recorded.applied_hashes.same_as(&record) && recorded.rollout == RolloutState::InProgress, "put back");
    }
}
