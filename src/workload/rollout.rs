//! Whether a workload's rollout is complete, from its status (issue 17's restart budget): the controller counts a
//! rollout it started as in flight until its workload says so. Pure rules, one per kind, and the slim status the
//! kinds served by custom resources are read into ([`RolloutStatus`]); below the kind files, it names none of them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constants::ON_DELETE;
use crate::rules::keys::RolloutState;

/// `status` of a custom workload: only what tells whether a rollout is complete (the restart budget, the health
/// gate). Argo Rollouts write `observedGeneration` as a string, DeploymentConfigs as a number.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Argo: `Healthy`, `Progressing`, `Paused`, `Degraded`.
    #[serde(default)]
    pub phase: Option<String>,
    /// The generation the workload's controller has acted on.
    #[serde(default)]
    pub observed_generation: Option<Value>,
    /// Pods.
    #[serde(default)]
    pub replicas: Option<i32>,
    /// Pods of the current template.
    #[serde(default)]
    pub updated_replicas: Option<i32>,
    /// Available pods.
    #[serde(default)]
    pub available_replicas: Option<i32>,
    /// Conditions (type, status, reason only).
    #[serde(default)]
    pub conditions: Vec<StatusCondition>,
}

/// One status condition.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct StatusCondition {
    /// `Progressing`, `Available`, …
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A Deployment: `observedGeneration ≥ generation`, and `updatedReplicas`, `availableReplicas` and `replicas`
/// all equal the desired count (old replicas gone). (Paused by a user: `super::summarise`.)
pub fn deployment(d: &k8s_openapi::api::apps::v1::Deployment) -> RolloutState {
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = &d.status else { return RolloutState::InProgress };
    let deadline_exceeded = status.conditions.iter().flatten().any(|c| {
        c.type_ == "Progressing"
            && c.status == "False"
            && c.reason.as_deref() == Some(crate::constants::PROGRESS_DEADLINE_EXCEEDED)
    });
    if deadline_exceeded && d.metadata.generation <= status.observed_generation {
        return RolloutState::Failed;
    }
    let counts = [status.updated_replicas, status.available_replicas, status.replicas];
    complete(d.metadata.generation, status.observed_generation, counts.map(|c| c.unwrap_or(0) == desired))
}

/// A StatefulSet: `observedGeneration ≥ generation`, `currentRevision == updateRevision`, and every replica
/// updated and ready. With `updateStrategy: OnDelete` a template write starts no rollout (its controller replaces
/// a pod only once someone deletes it: upstream stakater/Reloader#294): not tracked, so it holds no restart-budget
/// slot for `--rollout-timeout` and never counts as failed for the health gate.
pub fn statefulset(s: &k8s_openapi::api::apps::v1::StatefulSet) -> RolloutState {
    let strategy = s.spec.as_ref().and_then(|s| s.update_strategy.as_ref()).and_then(|u| u.type_.as_deref());
    if strategy == Some(ON_DELETE) {
        return RolloutState::Untracked;
    }
    let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = &s.status else { return RolloutState::InProgress };
    let same_revision = status.current_revision.is_some() && status.current_revision == status.update_revision;
    let counts = [status.updated_replicas.unwrap_or(0) == desired, status.ready_replicas.unwrap_or(0) == desired];
    complete(s.metadata.generation, status.observed_generation, [same_revision, counts[0], counts[1]])
}

/// A DaemonSet: `observedGeneration ≥ generation`, and every scheduled pod updated and available; with
/// `updateStrategy: OnDelete` not tracked, as a StatefulSet.
pub fn daemonset(d: &k8s_openapi::api::apps::v1::DaemonSet) -> RolloutState {
    let strategy = d.spec.as_ref().and_then(|s| s.update_strategy.as_ref()).and_then(|u| u.type_.as_deref());
    if strategy == Some(ON_DELETE) {
        return RolloutState::Untracked;
    }
    let Some(status) = &d.status else { return RolloutState::InProgress };
    let desired = status.desired_number_scheduled;
    let counts =
        [status.updated_number_scheduled.unwrap_or(0) == desired, status.number_available.unwrap_or(0) == desired];
    complete(d.metadata.generation, status.observed_generation, [counts[0], counts[1], true])
}

/// An Argo Rollout: `Degraded` (its progress deadline passed, or it was aborted) failed; `Healthy` with
/// `observedGeneration` (a string) equal to the generation complete; anything else (`Progressing`, `Paused` at
/// a canary step) in progress.
pub fn argo_rollout(generation: Option<i64>, status: Option<&RolloutStatus>) -> RolloutState {
    let Some(status) = status else { return RolloutState::InProgress };
    let observed = match &status.observed_generation {
        Some(serde_json::Value::String(s)) => s.parse::<i64>().ok(),
        Some(serde_json::Value::Number(n)) => n.as_i64(),
        _ => None,
    };
    match status.phase.as_deref() {
        Some("Degraded") => RolloutState::Failed,
        Some("Healthy") if observed.unwrap_or(0) >= generation.unwrap_or(0) => RolloutState::Complete,
        _ => RolloutState::InProgress,
    }
}

/// An OpenShift DeploymentConfig: as a Deployment — `ProgressDeadlineExceeded` failed; observed, and every
/// replica updated and available, complete.
pub fn deployment_config(generation: Option<i64>, desired: i32, status: Option<&RolloutStatus>) -> RolloutState {
    let Some(status) = status else { return RolloutState::InProgress };
    let observed = status.observed_generation.as_ref().and_then(serde_json::Value::as_i64);
    let deadline_exceeded = status.conditions.iter().any(|c| {
        c.type_ == "Progressing"
            && c.status == "False"
            && c.reason.as_deref() == Some(crate::constants::PROGRESS_DEADLINE_EXCEEDED)
    });
    if deadline_exceeded && observed.unwrap_or(0) >= generation.unwrap_or(0) {
        return RolloutState::Failed;
    }
    let counts = [status.updated_replicas, status.available_replicas, status.replicas];
    complete(generation, observed, counts.map(|c| c.unwrap_or(0) == desired))
}

/// A configured kind (`--workload-kind`), by its preset's status rule (`configured_kinds::StatusRule`).
/// `replicas`: `spec.replicas` (1 when absent, as Kubernetes defaults it).
pub fn configured(
    rule: crate::rules::configured_kinds::StatusRule,
    generation: Option<i64>,
    replicas: Option<i64>,
    status: Option<&serde_json::Value>,
) -> RolloutState {
    use crate::rules::configured_kinds::StatusRule;
    if rule == StatusRule::Untracked {
        return RolloutState::Untracked;
    }
    let Some(status) = status else { return RolloutState::InProgress };
    let number = |field: &str| status.get(field).and_then(serde_json::Value::as_i64);
    let observed = number("observedGeneration");
    match rule {
        StatusRule::ReadyCondition => {
            let conditions = status.get("conditions").and_then(serde_json::Value::as_array);
            let ready = conditions.into_iter().flatten().find(|c| c["type"] == "Ready");
            let ready = ready.and_then(|c| c["status"].as_str());
            let observed = observed.unwrap_or(0) >= generation.unwrap_or(0);
            match ready {
                Some("True") if observed => RolloutState::Complete,
                Some("False") if observed => RolloutState::Failed,
                _ => RolloutState::InProgress,
            }
        }
        StatusRule::Replicas => {
            let desired = replicas.unwrap_or(1);
            let counts = [number("replicas"), number("updatedReplicas"), number("readyReplicas")];
            complete(generation, observed, counts.map(|c| c.unwrap_or(0) == desired))
        }
        StatusRule::DaemonSet => {
            let desired = number("desiredNumberScheduled").unwrap_or(0);
            let counts = [number("updatedNumberScheduled"), number("numberAvailable")];
            let [updated, available] = counts.map(|c| c.unwrap_or(0) == desired);
            complete(generation, observed, [updated, available, true])
        }
        StatusRule::Untracked => RolloutState::Untracked,
    }
}

fn complete(generation: Option<i64>, observed: Option<i64>, checks: [bool; 3]) -> RolloutState {
    let observed = observed.unwrap_or(0) >= generation.unwrap_or(0);
    if observed && checks.iter().all(|c| *c) { RolloutState::Complete } else { RolloutState::InProgress }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    use serde_json::json;

    use super::*;

    fn object<T: serde::de::DeserializeOwned>(
        generation: i64,
        spec: serde_json::Value,
        status: serde_json::Value,
    ) -> T {
        serde_json::from_value(
            json!({"metadata": {"name": "w", "generation": generation}, "spec": spec, "status": status}),
        )
        .expect("object")
    }

    #[test]
    fn a_deployment_is_complete_once_its_template_is_observed_and_every_replica_replaced() {
        let spec = json!({"replicas": 2, "selector": {}, "template": {}});
        let done = json!({"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(deployment(&object::<Deployment>(3, spec.clone(), done)), RolloutState::Complete);
        let unobserved = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(deployment(&object::<Deployment>(3, spec.clone(), unobserved)), RolloutState::InProgress);
        let surging = json!({"observedGeneration": 3, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(deployment(&object::<Deployment>(3, spec.clone(), surging)), RolloutState::InProgress);
        let stuck = json!({"observedGeneration": 3, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2,
                           "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]});
        assert_eq!(deployment(&object::<Deployment>(3, spec.clone(), stuck.clone())), RolloutState::Failed);
        // The template written after the failure is not observed yet: its rollout has not failed.
        assert_eq!(deployment(&object::<Deployment>(4, spec, stuck)), RolloutState::InProgress);
    }

    #[test]
    fn configured_kinds_follow_their_presets_status_rule() {
        use crate::rules::configured_kinds::StatusRule;
        let state = |rule, status: serde_json::Value| configured(rule, Some(3), Some(2), Some(&status));
        let ready = |s: &str, observed: i64| json!({"observedGeneration": observed, "conditions": [{"type": "Ready", "status": s}]});
        assert_eq!(state(StatusRule::ReadyCondition, ready("True", 3)), RolloutState::Complete);
        assert_eq!(state(StatusRule::ReadyCondition, ready("True", 2)), RolloutState::InProgress);
        assert_eq!(state(StatusRule::ReadyCondition, ready("Unknown", 3)), RolloutState::InProgress);
        assert_eq!(state(StatusRule::ReadyCondition, ready("False", 3)), RolloutState::Failed);
        let clone = |updated: i64| json!({"observedGeneration": 3, "replicas": 2, "updatedReplicas": updated, "readyReplicas": 2});
        assert_eq!(state(StatusRule::Replicas, clone(2)), RolloutState::Complete);
        assert_eq!(state(StatusRule::Replicas, clone(1)), RolloutState::InProgress);
        let ds = json!({"observedGeneration": 3, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2});
        assert_eq!(state(StatusRule::DaemonSet, ds), RolloutState::Complete);
        assert_eq!(state(StatusRule::Untracked, json!({})), RolloutState::Untracked);
        assert_eq!(configured(StatusRule::Replicas, Some(1), None, None), RolloutState::InProgress);
    }

    #[test]
    fn argo_rollouts_and_deployment_configs_read_their_own_fields() {
        let status = |v: serde_json::Value| serde_json::from_value::<RolloutStatus>(v).expect("status");
        let healthy = status(json!({"phase": "Healthy", "observedGeneration": "4"}));
        assert_eq!(argo_rollout(Some(4), Some(&healthy)), RolloutState::Complete);
        assert_eq!(argo_rollout(Some(5), Some(&healthy)), RolloutState::InProgress, "new template not observed");
        let paused = status(json!({"phase": "Paused", "observedGeneration": "4"}));
        assert_eq!(argo_rollout(Some(4), Some(&paused)), RolloutState::InProgress, "at a canary step");
        let degraded = status(json!({"phase": "Degraded", "observedGeneration": "4"}));
        assert_eq!(argo_rollout(Some(4), Some(&degraded)), RolloutState::Failed);
        let done =
            status(json!({"observedGeneration": 7, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}));
        assert_eq!(deployment_config(Some(7), 2, Some(&done)), RolloutState::Complete);
        assert_eq!(deployment_config(Some(8), 2, Some(&done)), RolloutState::InProgress);
        let stuck =
            status(json!({"observedGeneration": 7, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}));
        assert_eq!(deployment_config(Some(7), 2, Some(&stuck)), RolloutState::Failed);
    }

    #[test]
    fn statefulsets_and_daemonsets_read_their_own_fields() {
        let spec = json!({"replicas": 1, "selector": {}, "template": {}, "serviceName": "w"});
        let done = json!({"observedGeneration": 2, "replicas": 1, "currentRevision": "b", "updateRevision": "b",
                          "updatedReplicas": 1, "readyReplicas": 1});
        assert_eq!(statefulset(&object::<StatefulSet>(2, spec.clone(), done)), RolloutState::Complete);
        let rolling = json!({"observedGeneration": 2, "replicas": 1, "currentRevision": "a", "updateRevision": "b",
                             "updatedReplicas": 1, "readyReplicas": 1});
        assert_eq!(statefulset(&object::<StatefulSet>(2, spec, rolling)), RolloutState::InProgress);
        let spec = json!({"selector": {}, "template": {}});
        let done = json!({"observedGeneration": 5, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
                          "numberMisscheduled": 0, "numberReady": 2, "updatedNumberScheduled": 2, "numberAvailable": 2});
        assert_eq!(daemonset(&object::<DaemonSet>(5, spec.clone(), done)), RolloutState::Complete);
        let rolling = json!({"observedGeneration": 5, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
                             "numberMisscheduled": 0, "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 2});
        assert_eq!(daemonset(&object::<DaemonSet>(5, spec, rolling)), RolloutState::InProgress);
    }

    /// `OnDelete`: a template write replaces no pod, so nothing is awaited (upstream #294).
    #[test]
    fn on_delete_statefulsets_and_daemonsets_are_not_tracked() {
        let on_delete = json!({"replicas": 1, "selector": {}, "template": {}, "serviceName": "w",
                               "updateStrategy": {"type": "OnDelete"}});
        let rolling = json!({"observedGeneration": 2, "currentRevision": "a", "updateRevision": "b"});
        assert_eq!(statefulset(&object::<StatefulSet>(2, on_delete.clone(), rolling)), RolloutState::Untracked);
        let rolling = json!({"observedGeneration": 5, "desiredNumberScheduled": 2, "updatedNumberScheduled": 0});
        assert_eq!(daemonset(&object::<DaemonSet>(5, on_delete, rolling)), RolloutState::Untracked);
    }
}
