//! What a write is and the pieces every kind's write is made of: [`WorkloadWrite`] (everything one reconcile writes)
//! and the choices it carries ([`WriteStyle`], [`CronJobReload`]); the patch bodies (the hashes record, the template
//! change and, for Deployments, pausing, in one strategic merge patch for kinds with a mutable pod template); and the
//! requests the kinds share: objects read as JSON, the record patched alone, PATCHes whose responses are not
//! decoded. Below every kind file: it names none of them.

use std::fmt;

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use serde_json::{Value, json};

use super::{WorkloadKey, WorkloadObject, owed_jobs::OwedJobs};
use crate::constants::{
    FIELD_MANAGER,
    annotation::{APPLIED_HASHES, CRONJOB_RELOAD, RESTART_PODS_CREATED_BEFORE},
};
use crate::rules::{
    pause::PauseAction,
    strategy::{self, ReloadStrategy, TemplateChange},
    values::WorkloadProblem,
};

/// Everything one reconcile writes to a workload.
#[derive(Clone, Debug)]
pub struct WorkloadWrite<'a> {
    /// How the reload is recorded in the template.
    pub strategy: ReloadStrategy,
    /// The resources reloaded for (may be empty when only the record is written).
    pub changes: &'a [TemplateChange],
    /// The change's time, fixed when it was queued (every attempt writes the same): upstream's `observedAt` (its
    /// second), the restart strategy's mark.
    pub changed_at: jiff::Timestamp,
    /// New `applied-hashes` record, if it must be written.
    pub applied_hashes: Option<String>,
    /// Pause or resume a Deployment in the same patch: (`paused-at` key, action).
    pub pause: Option<(&'a str, PauseAction)>,
    /// The `restart` rollout strategy: `kubectl rollout restart`'s mark (`restartedAt` on the template, Argo's
    /// `spec.restartAt`) instead of the reload strategy's; the hashes go to the record only.
    pub restart: bool,
    /// `evict-pods`/`delete-pods`: the boundary written instead of a template change (`crate::rules::pod_restarts`).
    pub restart_pods_before: Option<String>,
    /// A CronJob's `cronjob-reload` mode: spawn a Job, or patch its job template.
    pub cronjob_reload: CronJobReload,
    /// Where a Job deleted for a reload is recorded until it exists again (`None`: not recorded).
    pub owed_jobs: Option<&'a OwedJobs>,
}

/// How a reload is written into a kind ([`WorkloadObject::WRITE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteStyle {
    /// One strategic merge patch of the pod template and the record (Deployments, StatefulSets, DaemonSets).
    TemplatePatch,
    /// A new Job from the job template, once per change (CronJobs: their template is not the running pods').
    SpawnJob,
    /// Delete and create again (Jobs: their pod template is immutable).
    Recreate,
    /// One JSON merge patch (kinds served by CRDs reject strategic merge); `restart_at`: the kind has Argo's
    /// `spec.restartAt` for `rollout-strategy: restart`.
    MergePatch {
        /// The kind can restart through `spec.restartAt`.
        restart_at: bool,
    },
}

/// How a change reloads a CronJob: `reloader.stakater.com/cronjob-reload` on its metadata (issue 29, upstream
/// stakater/Reloader#1100: a Job spawned at an unscheduled moment is not always wanted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CronJobReload {
    /// Upstream's: a Job from the job template, now.
    #[default]
    Spawn,
    /// The job template only, as a Deployment's pod template: the next scheduled run uses the new content.
    Patch,
}

impl CronJobReload {
    /// The annotation's value for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spawn => "spawn",
            Self::Patch => "patch",
        }
    }

    /// The mode the annotation's `value` asks for on a workload whose kind it `applies` to
    /// ([`crate::rules::keys::KindFacts::cronjob_reload`]), and what is wrong with it: an unknown value keeps
    /// upstream's `spawn`; on another kind it means nothing.
    pub fn from_annotation(applies: bool, value: Option<&str>) -> (Self, Option<WorkloadProblem>) {
        let Some(value) = value else { return (Self::Spawn, None) };
        let problem = |message: String| {
            Some(WorkloadProblem { key: CRONJOB_RELOAD.to_owned(), value: value.to_owned(), message })
        };
        match value {
            _ if !applies => {
                (Self::Spawn, problem(format!("Annotation '{CRONJOB_RELOAD}' only applicable for cronjobs")))
            }
            "spawn" => (Self::Spawn, None),
            "patch" => (Self::Patch, None),
            _ => (
                Self::Spawn,
                problem(format!(
                    "annotation {CRONJOB_RELOAD:?}: {value:?} is not a CronJob reload (spawn, patch); a Job is spawned"
                )),
            ),
        }
    }
}

/// The metadata a write sets: the record and, for `evict-pods`/`delete-pods`, the boundary.
pub(super) fn metadata_fragment(w: &WorkloadWrite<'_>) -> Option<Value> {
    let mut annotations = serde_json::Map::new();
    if let Some(hashes) = &w.applied_hashes {
        annotations.insert(APPLIED_HASHES.to_owned(), json!(hashes));
    }
    if let Some(boundary) = &w.restart_pods_before {
        annotations.insert(RESTART_PODS_CREATED_BEFORE.to_owned(), json!(boundary));
    }
    (!annotations.is_empty()).then(|| json!({"annotations": annotations}))
}

/// The one patch for kinds with a mutable pod template: the hashes record, the template change and, for
/// Deployments, pausing (v2 applies the pause in the same patch; v1 used two writes and could get stuck).
pub(super) fn template_patch_body(w: &WorkloadWrite<'_>) -> Value {
    let mut body = json!({});
    if let Some(meta) = metadata_fragment(w) {
        body["metadata"] = meta;
    }
    if !w.changes.is_empty() {
        let template = if w.restart {
            strategy::restart_template_patch(w.changed_at)
        } else {
            strategy::template_patch(w.strategy, w.changes, w.changed_at.as_second())
        };
        body["spec"] = json!({"template": template});
    }
    let pause = match &w.pause {
        Some((key, PauseAction::Pause { at })) => Some((*key, json!(at), true)),
        Some((key, PauseAction::Resume)) => Some((*key, Value::Null, false)),
        _ => None,
    };
    if let Some((key, at, paused)) = pause {
        body["metadata"]["annotations"][key] = at;
        body["spec"]["paused"] = json!(paused);
    }
    body
}

/// Writes a reload into a kind with a mutable pod template: [`template_patch_body`] as one strategic merge patch.
pub(super) async fn template_patch<K: WorkloadObject>(
    client: &Client,
    key: &WorkloadKey,
    w: &WorkloadWrite<'_>,
) -> Result<Option<i64>, kube::Error> {
    let url = K::url_path(&(), Some(&key.namespace));
    patch_for_generation(client, &url, &key.name, &Patch::Strategic(&template_patch_body(w))).await
}

/// Objects of kind `K` in `namespace` as JSON, so fields newer than this binary's API types survive a
/// read-modify-create (CronJob spawns, Job recreates).
pub(super) fn json_api<K: WorkloadObject>(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<K>(&()))
}

/// GETs `name` as a JSON value.
pub(super) async fn get_json(api: &Api<DynamicObject>, name: &str) -> Result<Value, kube::Error> {
    serde_json::to_value(api.get(name).await?).map_err(kube::Error::SerdeError)
}

/// Records the hashes only (metadata never rolls pods).
pub(super) async fn patch_metadata<K: WorkloadObject>(
    client: &Client,
    key: &WorkloadKey,
    w: &WorkloadWrite<'_>,
) -> Result<(), kube::Error> {
    match metadata_fragment(w) {
        Some(meta) => strategic_patch::<K>(client, key, &json!({"metadata": meta})).await,
        None => Ok(()),
    }
}

pub(super) async fn strategic_patch<K: WorkloadObject>(
    client: &Client,
    key: &WorkloadKey,
    body: &Value,
) -> Result<(), kube::Error> {
    let url = K::url_path(&(), Some(&key.namespace));
    patch_for_generation(client, &url, &key.name, &Patch::Strategic(body)).await.map(|_| ())
}

/// PATCHes `name` in the collection at `url` as field manager `reloader`, and decodes only the generation of
/// the object the API server returns (the restart budget: a write that changed no template rolls nothing): the
/// workload watch delivers the object anyway, and decoding a whole workload per reload took CPU from the cores a
/// small control plane shares with the controller (bench/results/HISTORY.md, S2).
pub(super) async fn patch_for_generation<P: serde::Serialize + fmt::Debug>(
    client: &Client,
    url: &str,
    name: &str,
    patch: &Patch<P>,
) -> Result<Option<i64>, kube::Error> {
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    let request = kube::core::Request::new(url).patch(name, &params, patch).map_err(kube::Error::BuildRequest)?;
    crate::client::send_for_generation(client, request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{hash::ContentHash, resource::ConfigKind};
    use crate::workload::test_support::{change, env_write};

    #[test]
    fn one_patch_carries_record_template_change_and_pause() {
        let changes = [change(ConfigKind::ConfigMap, "cfg", "app")];
        let w = WorkloadWrite {
            pause: Some(("example.com/paused-at", PauseAction::Pause { at: "2026-12-02T10:00:00Z".into() })),
            ..env_write(&changes, Some("{}"))
        };
        let hash = ContentHash::NONE.to_string();
        assert_eq!(
            template_patch_body(&w),
            serde_json::json!({
                "metadata": {"annotations": {APPLIED_HASHES: "{}", "example.com/paused-at": "2026-12-02T10:00:00Z"}},
                "spec": {"paused": true, "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": hash}]}]}}}
            })
        );
        let resume = WorkloadWrite { changes: &[], applied_hashes: None, pause: Some(("k", PauseAction::Resume)), ..w };
        assert_eq!(
            template_patch_body(&resume),
            serde_json::json!({"metadata": {"annotations": {"k": null}}, "spec": {"paused": false}})
        );
    }

    /// The restart strategy writes `kubectl rollout restart`'s mark at the change's time (the same on every attempt)
    /// and the record, and nothing of the reload strategy's.
    #[test]
    fn the_restart_strategy_writes_restarted_at_and_the_record_only() {
        let changes = [change(ConfigKind::ConfigMap, "cfg", "app")];
        let w = WorkloadWrite {
            changed_at: jiff::Timestamp::new(1_796_479_200, 123_456_789).expect("time"),
            restart: true,
            ..env_write(&changes, Some("{\"c/cfg\":\"x\"}"))
        };
        assert_eq!(
            template_patch_body(&w),
            serde_json::json!({
                "metadata": {"annotations": {APPLIED_HASHES: "{\"c/cfg\":\"x\"}"}},
                "spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-05T14:00:00.123Z"}}}}
            })
        );
    }
}
