//! batch/v1 Job: its template is immutable, so a reload deletes the Job (background propagation, so its pods
//! go too) and creates it again with the new template, as upstream does (§3.6). Fields the API server sets
//! (selector, controller-uid labels, status, identity) are stripped first. The Job is read and recreated as
//! JSON, so fields newer than this binary's API types survive the round trip.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::time::Duration;

use k8s_openapi::api::{batch::v1::Job, core::v1::PodTemplateSpec};
use kube::{
    Client,
    api::{DeleteParams, DynamicObject, PostParams},
};
use serde_json::Value;

use super::{
    KindFacts, Watched, WorkloadKey, WorkloadKind, WorkloadObject,
    owed_jobs::{CreateRefusal, Dropped, JobUnderName, OwedJob, OwedJobs, Settled, create_refusal, settle},
    patch::{WorkloadWrite, WriteStyle, get_json, json_api, patch_metadata},
};
use crate::constants::annotation::APPLIED_HASHES;
use crate::rules::strategy::apply_to_template_json;

impl WorkloadObject for Job {
    const KIND: WorkloadKind = WorkloadKind::Job;
    const WRITE: WriteStyle = WriteStyle::Recreate;
    type Spec = k8s_openapi::api::batch::v1::JobSpec;
    type Status = k8s_openapi::api::batch::v1::JobStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "batch/v1",
            api_resource: "jobs.batch",
            names: &["job"],
            watched: Watched::UnlessJobsIgnored,
            tracks_rollouts: false,
            runs_to_completion: true,
            ..KindFacts::ROLLED_OUT
        }
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<Self::Spec>, status: Option<Self::Status>) -> Self {
        Self { metadata, spec, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

/// Labels the Job controller derives from the Job's UID and name (upstream strips these four).
const GENERATED_LABELS: [&str; 4] =
    ["controller-uid", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "job-name"];

/// Metadata the API server owns; a new object must not carry it.
const SERVER_METADATA: [&str; 8] = [
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// Recreates the Job with the new template, or only records the hashes when nothing reloads.
///
/// The old Job is deleted only once a create of the new one is known to be admitted: a dry-run create answered
/// "already exists" has passed admission (webhooks, policies, quota run before the name is checked), so a
/// webhook that refuses Job creates leaves the user's Job in place and the reload is retried by the work queue
/// (issue 27, finding 1: before, the Job was deleted and the create failed, and the Job was gone for good).
/// Before the DELETE the new Job is recorded as owed (`super::owed_jobs`), so a crash, a failover or a create
/// refused for longer than this write does not lose it: the next reconcile of the Job, here or in whoever leads
/// next, settles the entry first ([`resume`]). A DELETE answered 404 was applied already (a lost response): the
/// create follows. The create itself is tried again briefly ([`CREATE_RETRY_BUDGET`]) only for what a moment
/// cures (the old object still there, throttling, a lost response), so no worker waits minutes.
pub(super) async fn write(client: &Client, key: &WorkloadKey, w: &WorkloadWrite<'_>) -> Result<(), kube::Error> {
    if w.changes.is_empty() {
        return patch_metadata::<Job>(client, key, w).await;
    }
    let jobs = json_api::<Job>(client, &key.namespace);
    let current = get_json(&jobs, &key.name).await?;
    let old_uid = current.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned);
    let owed = OwedJob { old_uid, job: recreated(current, w), recorded_at: Some(jiff::Timestamp::now()) };
    let job: DynamicObject = serde_json::from_value(owed.job.clone()).map_err(kube::Error::SerdeError)?;
    match jobs.create(&PostParams { dry_run: true, ..PostParams::default() }, &job).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(refused) => return Err(refused),
    }
    let recorded = match w.owed_jobs {
        Some(store) => store.record(client, key, &owed).await,
        None => false,
    };
    match jobs.delete(&key.name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e),
    }
    create_owed(client, &jobs, key, &owed, w.owed_jobs.filter(|_| recorded)).await
}

/// What settling an owed entry came to ([`resume`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// Nothing is owed for the Job.
    Nothing,
    /// The owed Job was created now.
    Created,
    /// The replaced Job is still being deleted: to be looked at again.
    Waiting,
    /// The entry was dropped, for this reason.
    Dropped(Dropped),
}

/// Settles what an earlier write left owed for a workload — a Job deleted for a reload and maybe not created again
/// (`super::owed_jobs`) — against the Job now under its name (`owed_jobs::settle`): creates the recorded Job
/// when it is gone and the entry within its lifetime, drops the entry when the recreation happened, the old Job
/// was never deleted, the entry is past its lifetime or the namespace is gone. A create refused otherwise (a
/// quota, a webhook) is returned, and the entry kept for the work queue's next attempt.
pub async fn resume(client: &Client, key: &WorkloadKey, store: &OwedJobs) -> Result<Resumed, kube::Error> {
    if !store.may_owe(key) {
        return Ok(Resumed::Nothing);
    }
    let Some(owed) = store.get(client, key).await? else { return Ok(Resumed::Nothing) };
    let jobs = json_api::<Job>(client, &key.namespace);
    let current = jobs.get_opt(&key.name).await?;
    let under_name = current
        .as_ref()
        .map(|j| JobUnderName { uid: j.metadata.uid.as_deref(), deleting: j.metadata.deletion_timestamp.is_some() });
    let dropped = match settle(&owed, under_name, jiff::Timestamp::now(), store.lifetime()) {
        Settled::Wait => return Ok(Resumed::Waiting),
        Settled::Drop(why) => why,
        Settled::Create => match create_owed(client, &jobs, key, &owed, Some(store)).await {
            Ok(()) => return Ok(Resumed::Created),
            Err(e) if create_refusal(&e) == Some(CreateRefusal::NamespaceGone) => Dropped::NamespaceGone,
            Err(e) => return Err(e),
        },
    };
    store.clear(client, key).await?;
    Ok(Resumed::Dropped(dropped))
}

/// Creates the Job that replaces the one deleted (within [`CREATE_RETRY_BUDGET`]), then clears its entry in
/// `store` (where it was recorded). A create that fails leaves the entry for the next attempt; a clear that fails
/// leaves it to the next reconcile of the Job, which finds the new Job under the name and drops it ([`settle`]).
async fn create_owed(
    client: &Client,
    jobs: &kube::Api<DynamicObject>,
    key: &WorkloadKey,
    owed: &OwedJob,
    store: Option<&OwedJobs>,
) -> Result<(), kube::Error> {
    let job: DynamicObject = serde_json::from_value(owed.job.clone()).map_err(kube::Error::SerdeError)?;
    let mut delay = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    loop {
        match jobs.create(&PostParams::default(), &job).await {
            Ok(_) => break,
            // A create answered 5xx may have been applied: a Job under the name that is not the old one is ours.
            Err(kube::Error::Api(s))
                if s.code == 409 && created_already(jobs, &key.name, owed.old_uid.as_deref()).await =>
            {
                break;
            }
            Err(e) if retry_create(&e) && waited < CREATE_RETRY_BUDGET => {
                tracing::debug!(workload = %key, "recreating the Job: {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                waited += delay;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(store) = store
        && let Err(e) = store.clear(client, key).await
    {
        // The entry names a Job that exists now: the reconcile its watch event brings drops it.
        tracing::debug!(workload = %key, "clearing the owed recreation: {e}");
    }
    Ok(())
}

/// Whether a Job named `name` exists that is not the one with `old_uid`.
async fn created_already(jobs: &kube::Api<DynamicObject>, name: &str, old_uid: Option<&str>) -> bool {
    matches!(jobs.get_opt(name).await, Ok(Some(job)) if job.metadata.uid.as_deref() != old_uid)
}

/// How long a Job deleted for a reload is retried to be created again (its create was admitted a moment ago).
const CREATE_RETRY_BUDGET: Duration = Duration::from_secs(15);

/// Errors worth another create after the delete: the old object lingering, throttling, server errors,
/// transport failures.
fn retry_create(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 409 | 429) || s.code >= 500,
        _ => true,
    }
}

/// The Job to create: the old one without server-owned fields and generated selector/labels (unless the
/// selector is manual), with the new template and the hash record.
fn recreated(mut job: Value, w: &WorkloadWrite<'_>) -> Value {
    let manual_selector = job.pointer("/spec/manualSelector").and_then(Value::as_bool).unwrap_or(false);
    if let Some(meta) = job.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| !SERVER_METADATA.contains(&k.as_str()));
    }
    if let Some(hashes) = &w.applied_hashes {
        job["metadata"]["annotations"][APPLIED_HASHES] = Value::String(hashes.clone());
    }
    if let Some(object) = job.as_object_mut() {
        object.remove("status");
    }
    if let Some(template) = job.pointer_mut("/spec/template") {
        apply_to_template_json(template, w.strategy, w.changes, w.changed_at.as_second());
    }
    if !manual_selector {
        if let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("selector");
        }
        for labels in ["/metadata/labels", "/spec/template/metadata/labels"] {
            if let Some(labels) = job.pointer_mut(labels).and_then(Value::as_object_mut) {
                labels.retain(|k, _| !GENERATED_LABELS.contains(&k.as_str()));
            }
        }
    }
    job
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rules::{hash::ContentHash, resource::ConfigKind};
    use crate::workload::test_support::{change, env_write};

    #[test]
    fn a_recreated_job_keeps_unknown_fields_and_drops_what_the_server_set() {
        let changes = [change(ConfigKind::ConfigMap, "cfg", "main")];
        let w = env_write(&changes, Some("{\"ConfigMap/cfg\":\"x\"}"));
        let old = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "migrate", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 1,
                         "creationTimestamp": "2026-12-02T10:00:00Z", "managedFields": [],
                         "labels": {"team": "a", "job-name": "migrate", "controller-uid": "u"}},
            "spec": {"backoffLimit": 0, "managedBy": "kubernetes.io/job-controller", "futureField": {"x": 1},
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     "template": {"metadata": {"labels": {"batch.kubernetes.io/job-name": "migrate", "team": "a"}},
                                  "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x", "futureContainerField": true}]}}},
            "status": {"succeeded": 1}
        });
        let hash = ContentHash::NONE.to_string();
        assert_eq!(
            recreated(old, &w),
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "migrate", "namespace": "ns", "labels": {"team": "a"},
                             "annotations": {APPLIED_HASHES: "{\"ConfigMap/cfg\":\"x\"}"}},
                "spec": {"backoffLimit": 0, "managedBy": "kubernetes.io/job-controller", "futureField": {"x": 1},
                         "template": {"metadata": {"labels": {"team": "a"}},
                                      "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x", "futureContainerField": true,
                                               "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": hash}]}]}}}
            })
        );
    }

    #[test]
    fn a_manual_selector_and_its_labels_are_kept() {
        let w = env_write(&[], None);
        let old = json!({"metadata": {"name": "j", "labels": {"job-name": "j"}},
                         "spec": {"manualSelector": true, "selector": {"matchLabels": {"job-name": "j"}}, "template": {}}});
        assert_eq!(recreated(old.clone(), &w), old);
    }
}
