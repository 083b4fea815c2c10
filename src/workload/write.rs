//! Writing a reload into a workload: one strategic merge patch for kinds with a mutable pod template (the
//! hashes record, the template change and, for Deployments, pausing), the kind's own write for the others, and
//! PATCHes whose responses are not decoded.

use std::fmt;

use futures::future::BoxFuture;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use serde_json::{Value, json};

use super::{
    WorkloadKey, WorkloadObject, cronjob, custom, job,
    kinds::{self, KindVisitor},
};
use crate::{
    constants::{
        FIELD_MANAGER,
        annotation::{APPLIED_HASHES, RESTART_PODS_CREATED_BEFORE},
    },
    pause::PauseAction,
    strategy::{self, ReloadStrategy, TemplateChange},
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
    /// `evict-pods`/`delete-pods`: the boundary written instead of a template change (`crate::pod_restarts`).
    pub restart_pods_before: Option<String>,
    /// A CronJob's `cronjob-reload` mode: spawn a Job, or patch its job template.
    pub cronjob_reload: super::CronJobReload,
    /// Where a Job deleted for a reload is recorded until it exists again (`None`: not recorded).
    pub owed_jobs: Option<&'a super::OwedJobs>,
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

/// Writes a reload the way its kind is written ([`WriteStyle`]). Returns the workload's `metadata.generation`
/// after the write when its response says (kinds whose rollouts are tracked): equal to the one before, the
/// template did not change.
pub async fn write(client: &Client, key: &WorkloadKey, w: &WorkloadWrite<'_>) -> Result<Option<i64>, kube::Error> {
    kinds::visit(key.kind, Write { client, key, w }).await
}

/// [`write`] for one kind's type.
struct Write<'a, 'w> {
    client: &'a Client,
    key: &'a WorkloadKey,
    w: &'a WorkloadWrite<'w>,
}

impl<'a, 'w> KindVisitor for Write<'a, 'w> {
    type Output = BoxFuture<'a, Result<Option<i64>, kube::Error>>;

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        let Self { client, key, w } = self;
        Box::pin(async move {
            match K::WRITE {
                WriteStyle::TemplatePatch => template_patch::<K>(client, key, w).await,
                WriteStyle::SpawnJob => cronjob::write(client, key, w).await.map(|()| None),
                WriteStyle::Recreate => job::write(client, key, w).await.map(|()| None),
                WriteStyle::MergePatch { restart_at } => custom::write::<K>(client, key, w, restart_at).await,
            }
        })
    }
}

/// Settles what an earlier write left owed for a workload: a Job deleted for a reload and maybe not created
/// again (`super::owed_jobs`), created or dropped by what is under its name now.
pub async fn resume(
    client: &Client,
    key: &WorkloadKey,
    owed_jobs: &super::OwedJobs,
) -> Result<super::Resumed, kube::Error> {
    job::resume(client, key, owed_jobs).await
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

async fn template_patch<K: WorkloadObject>(
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
    use crate::{
        hash::ContentHash,
        resource::ConfigKind,
        workload::{
            WorkloadKind,
            test_support::{change, env_write},
        },
    };

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

    /// A reload is one strategic merge PATCH as field manager `reloader`, asking for the metadata only; a
    /// response in either shape (or none decodable) is a success.
    #[tokio::test]
    async fn a_reload_is_one_patch_asking_for_metadata_only() {
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
        let client = Client::new(service, "default");
        let server = tokio::spawn(async move {
            let (request, respond) = handle.next_request().await.expect("a request");
            let shape = (
                request.method().to_string(),
                request.uri().to_string(),
                request.headers().get(http::header::ACCEPT).cloned(),
                request.headers().get(http::header::CONTENT_TYPE).cloned(),
            );
            let body = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web"}}"#;
            respond.send_response(http::Response::new(Body::from(body.as_bytes().to_vec())));
            shape
        });
        let key = WorkloadKey { kind: WorkloadKind::Deployment, namespace: "ns".into(), name: "web".into() };
        let w = WorkloadWrite {
            strategy: ReloadStrategy::Annotations,
            changes: &[],
            changed_at: jiff::Timestamp::UNIX_EPOCH,
            applied_hashes: Some("{}".into()),
            pause: None,
            restart: false,
            restart_pods_before: None,
            cronjob_reload: Default::default(),
            owed_jobs: None,
        };
        write(&client, &key, &w).await.expect("written");
        let (method, uri, accept, content_type) = server.await.expect("server");
        assert_eq!(method, "PATCH");
        assert_eq!(uri, "/apis/apps/v1/namespaces/ns/deployments/web?&fieldManager=reloader");
        assert_eq!(accept.as_ref().and_then(|v| v.to_str().ok()), Some(crate::constants::ACCEPT_METADATA_ONLY));
        assert_eq!(content_type.as_ref().and_then(|v| v.to_str().ok()), Some("application/strategic-merge-patch+json"));
    }
}
