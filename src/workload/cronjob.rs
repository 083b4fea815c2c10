//! batch/v1 CronJob: never modified (upstream). A reload creates a Job from its job template carrying the new
//! hash, owned by the CronJob and marked `cronjob.kubernetes.io/instantiate: manual` (§3.6); the hashes are
//! then recorded in the CronJob's metadata so a restart does not spawn again.

use k8s_openapi::{
    api::{
        batch::v1::{CronJob, Job},
        core::v1::PodTemplateSpec,
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Api, Client, Resource, api::PostParams};

use super::{WorkloadKey, WorkloadKind, WorkloadObject, WorkloadWrite, patch_metadata};
use crate::{constants::CRONJOB_INSTANTIATE, strategy::apply_to_template};

impl WorkloadObject for CronJob {
    const KIND: WorkloadKind = WorkloadKind::CronJob;

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.job_template.spec.as_ref().map(|s| &s.template)
    }
}

/// Spawns the Job, then records the hashes on the CronJob.
pub(super) async fn write(client: &Client, key: &WorkloadKey, w: &WorkloadWrite<'_>) -> Result<(), kube::Error> {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), &key.namespace);
    if !w.changes.is_empty() {
        let cronjob = cronjobs.get(&key.name).await?;
        let job = job_from(&cronjob, w);
        Api::<Job>::namespaced(client.clone(), &key.namespace).create(&PostParams::default(), &job).await?;
    }
    patch_metadata::<CronJob>(client, key, w).await
}

/// The Job upstream creates: `generateName: <cronjob>-`, the job template's labels, its annotations over
/// `instantiate: manual`, a controller reference to the CronJob, and the template with the new hash.
fn job_from(cronjob: &CronJob, w: &WorkloadWrite<'_>) -> Job {
    let template = cronjob.spec.as_ref().map(|s| s.job_template.clone()).unwrap_or_default();
    let mut annotations =
        std::collections::BTreeMap::from([(CRONJOB_INSTANTIATE.0.to_owned(), CRONJOB_INSTANTIATE.1.to_owned())]);
    annotations.extend(template.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default());
    let mut spec = template.spec.unwrap_or_default();
    apply_to_template(&mut spec.template, w.strategy, w.changes, w.now_unix);
    let owner = OwnerReference {
        api_version: "batch/v1".into(),
        kind: "CronJob".into(),
        name: cronjob.metadata.name.clone().unwrap_or_default(),
        uid: cronjob.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut job = Job { spec: Some(spec), ..Job::default() };
    let meta = job.meta_mut();
    meta.generate_name = Some(format!("{}-", owner.name));
    meta.namespace = cronjob.metadata.namespace.clone();
    meta.labels = template.metadata.and_then(|m| m.labels);
    meta.annotations = Some(annotations);
    meta.owner_references = Some(vec![owner]);
    job
}
