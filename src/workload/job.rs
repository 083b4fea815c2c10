//! batch/v1 Job: its template is immutable, so a reload deletes the Job (background propagation, so its pods
//! go too) and creates it again with the new template, as upstream does (§3.6). Fields the API server sets
//! (selector, controller-uid labels, status, identity) are stripped first.

use std::time::Duration;

use k8s_openapi::api::{batch::v1::Job, core::v1::PodTemplateSpec};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};

use super::{WorkloadKey, WorkloadKind, WorkloadObject, WorkloadWrite, patch_metadata};
use crate::{constants::annotation::APPLIED_HASHES, strategy::apply_to_template};

impl WorkloadObject for Job {
    const KIND: WorkloadKind = WorkloadKind::Job;

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

/// Labels the Job controller derives from the Job's UID and name (upstream strips these four).
const GENERATED_LABELS: [&str; 4] =
    ["controller-uid", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "job-name"];

/// Recreates the Job with the new template, or only records the hashes when nothing reloads.
pub(super) async fn write(client: &Client, key: &WorkloadKey, w: &WorkloadWrite<'_>) -> Result<(), kube::Error> {
    if w.changes.is_empty() {
        return patch_metadata::<Job>(client, key, w).await;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &key.namespace);
    let job = recreated(jobs.get(&key.name).await?, w);
    jobs.delete(&key.name, &DeleteParams::background()).await?;
    // The old object may linger for a moment; AlreadyExists is retried briefly, then left to the queue.
    let mut attempt = 0;
    loop {
        match jobs.create(&PostParams::default(), &job).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 50 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other.map(|_| ()),
        }
    }
}

fn recreated(mut job: Job, w: &WorkloadWrite<'_>) -> Job {
    let manual_selector = job.spec.as_ref().and_then(|s| s.manual_selector).unwrap_or(false);
    let meta = &mut job.metadata;
    meta.resource_version = None;
    meta.uid = None;
    meta.creation_timestamp = None;
    meta.generation = None;
    meta.managed_fields = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    if let Some(hashes) = &w.applied_hashes {
        meta.annotations.get_or_insert_with(Default::default).insert(APPLIED_HASHES.to_owned(), hashes.clone());
    }
    job.status = None;
    if let Some(spec) = job.spec.as_mut() {
        apply_to_template(&mut spec.template, w.strategy, w.changes, w.now_unix);
        if !manual_selector {
            spec.selector = None;
            for labels in
                [spec.template.metadata.as_mut().and_then(|m| m.labels.as_mut()), job.metadata.labels.as_mut()]
                    .into_iter()
                    .flatten()
            {
                labels.retain(|k, _| !GENERATED_LABELS.contains(&k.as_str()));
            }
        }
    }
    job
}
