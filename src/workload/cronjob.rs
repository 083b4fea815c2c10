//! batch/v1 CronJob: never modified (upstream). A reload creates a Job from its job template carrying the new
//! hash, owned by the CronJob and marked `cronjob.kubernetes.io/instantiate: manual` (§3.6); the hashes are
//! then recorded in the CronJob's metadata so a restart does not spawn again. The CronJob is read and the Job
//! built as JSON, so job-template fields newer than this binary's API types are kept. With
//! `reloader.stakater.com/cronjob-reload: patch` (ours, issue 29) the job template is patched instead and nothing
//! runs until the next scheduled run (the mode, [`CronJobReload`], is read in `patch.rs`: the write carries it).

use k8s_openapi::api::{
    batch::v1::{CronJob, Job},
    core::v1::PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Client,
    api::{DynamicObject, PostParams},
};
use serde_json::{Value, json};

use super::{
    KindFacts, Watched, WorkloadKey, WorkloadKind, WorkloadObject,
    patch::{
        CronJobReload, WorkloadWrite, WriteStyle, get_json, json_api, patch_metadata, strategic_patch,
        template_patch_body,
    },
};
use crate::constants::{CRONJOB_INSTANTIATE, annotation::APPLIED_HASHES};
use crate::rules::{hash::ContentHash, strategy::apply_to_template_json};

impl WorkloadObject for CronJob {
    const KIND: WorkloadKind = WorkloadKind::CronJob;
    const WRITE: WriteStyle = WriteStyle::SpawnJob;
    type Spec = k8s_openapi::api::batch::v1::CronJobSpec;
    type Status = k8s_openapi::api::batch::v1::CronJobStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "batch/v1",
            api_resource: "cronjobs.batch",
            names: &["cronjob", "cj"],
            watched: Watched::UnlessCronJobsIgnored,
            tracks_rollouts: false,
            runs_to_completion: true,
            cronjob_reload: true,
            ..KindFacts::ROLLED_OUT
        }
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<Self::Spec>, status: Option<Self::Status>) -> Self {
        Self { metadata, spec, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.job_template.spec.as_ref().map(|s| &s.template)
    }

    /// `spec.suspend`: a suspended CronJob spawns no Job for a reload ([`spawns_nothing`]).
    fn paused(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }
}

/// A suspended CronJob spawns nothing for a change (issue 29; upstream spawns a Job anyway, stakater/Reloader#822):
/// the change is recorded in its `applied-hashes` instead, so resuming it spawns no old reload, and its next
/// scheduled run uses its template as it is. With `cronjob-reload: patch` its template is patched as always. `kind`:
/// the workload's kind's facts (a kind `cronjob-reload` applies to is one that spawns).
pub fn spawns_nothing(kind: &KindFacts, pause: &crate::rules::pause::PauseState, reload: CronJobReload) -> bool {
    kind.cronjob_reload && pause.paused && reload == CronJobReload::Spawn
}

/// Spawns the Job, then records the hashes on the CronJob. The Job's name is derived from what it is spawned
/// for (the CronJob, the record it had, the new hashes), so repeating the write — after a lost response, a
/// failed record patch, a crash or a failover in between — finds the Job already there instead of spawning a
/// second one.
pub(super) async fn write(client: &Client, key: &WorkloadKey, w: &WorkloadWrite<'_>) -> Result<(), kube::Error> {
    if w.cronjob_reload == CronJobReload::Patch {
        return match patch_body(w) {
            Some(body) => strategic_patch::<CronJob>(client, key, &body).await,
            None => Ok(()),
        };
    }
    if !w.changes.is_empty() {
        let cronjob = get_json(&json_api::<CronJob>(client, &key.namespace), &key.name).await?;
        let job: DynamicObject = serde_json::from_value(job_from(&cronjob, w)).map_err(kube::Error::SerdeError)?;
        match json_api::<Job>(client, &key.namespace).create(&PostParams::default(), &job).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {
                tracing::debug!(workload = %key, "the Job for this change exists already: not spawning it again");
            }
            Err(e) => return Err(e),
        }
    }
    patch_metadata::<CronJob>(client, key, w).await
}

/// `cronjob-reload: patch`: the pod template patch a Deployment would get, under `spec.jobTemplate.spec`, and the
/// record, in one strategic merge patch (`None`: nothing to write).
fn patch_body(w: &WorkloadWrite<'_>) -> Option<Value> {
    let mut body = template_patch_body(w);
    if let Some(template) = body.get_mut("spec").and_then(Value::as_object_mut).and_then(|s| s.remove("template")) {
        body["spec"] = json!({"jobTemplate": {"spec": {"template": template}}});
    }
    (body != json!({})).then_some(body)
}

/// `<cronjob>-<8 hex>`: a digest of the CronJob's UID, the `applied-hashes` record it carries before this
/// spawn, and the new hashes. A CronJob name has at most 52 characters, so this fits a Job name (63).
fn job_name(cronjob: &Value, w: &WorkloadWrite<'_>) -> String {
    let meta = &cronjob["metadata"];
    let mut entries = vec![
        meta["uid"].as_str().unwrap_or_default().as_bytes().to_vec(),
        meta["annotations"][APPLIED_HASHES].as_str().unwrap_or_default().as_bytes().to_vec(),
    ];
    entries.extend(w.changes.iter().map(|c| format!("{}/{}={}", c.kind, c.name, c.hash).into_bytes()));
    let digest = ContentHash::of_entries(entries).to_string();
    let name = meta["name"].as_str().unwrap_or_default();
    format!("{name}-{}", &digest[..8])
}

/// The Job upstream creates (upstream names it `generateName: <cronjob>-`; ours is [`job_name`]), the job
/// template's labels, its annotations over
/// `instantiate: manual`, a controller reference to the CronJob, and the template with the new hash.
fn job_from(cronjob: &Value, w: &WorkloadWrite<'_>) -> Value {
    let template = &cronjob["spec"]["jobTemplate"];
    let mut annotations = json!({CRONJOB_INSTANTIATE.0: CRONJOB_INSTANTIATE.1});
    if let (Some(all), Some(given)) = (annotations.as_object_mut(), template["metadata"]["annotations"].as_object()) {
        all.extend(given.clone());
    }
    let mut spec = match &template["spec"] {
        Value::Object(_) => template["spec"].clone(),
        _ => json!({}),
    };
    apply_to_template_json(&mut spec["template"], w.strategy, w.changes, w.changed_at.as_second());
    let name = cronjob["metadata"]["name"].as_str().unwrap_or_default();
    let mut metadata = json!({
        "name": job_name(cronjob, w),
        "namespace": cronjob["metadata"]["namespace"],
        "annotations": annotations,
        "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": name, "uid": cronjob["metadata"]["uid"],
            "controller": true, "blockOwnerDeletion": true,
        }],
    });
    if let Some(labels) = template["metadata"].get("labels").filter(|l| l.is_object()) {
        metadata["labels"] = labels.clone();
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{hash::ContentHash, resource::ConfigKind};
    use crate::workload::test_support::{change, env_write};

    #[test]
    fn the_manual_job_has_upstreams_shape_and_keeps_unknown_template_fields() {
        let changes = [change(ConfigKind::Secret, "db", "main")];
        let w = env_write(&changes, None);
        let cronjob = json!({
            "metadata": {"name": "nightly", "namespace": "ns", "uid": "cj-uid", "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"schedule": "0 0 * * *", "jobTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x", CRONJOB_INSTANTIATE.0: "overridden"}},
                "spec": {"futureField": 3, "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "x"}]}}}}}
        });
        let hash = ContentHash::NONE.to_string();
        let name = job_name(&cronjob, &w);
        assert!(name.starts_with("nightly-") && name.len() == "nightly-".len() + 8, "{name}");
        assert_eq!(
            job_from(&cronjob, &w),
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {
                    "name": name, "namespace": "ns", "labels": {"team": "a"},
                    "annotations": {CRONJOB_INSTANTIATE.0: "overridden", "note": "x"},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "cj-uid",
                                         "controller": true, "blockOwnerDeletion": true}]
                },
                "spec": {"futureField": 3, "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "x", "env": [{"name": "STAKATER_DB_SECRET", "value": hash}]}]}}}
            })
        );
    }

    #[test]
    fn cronjob_reload_patch_writes_the_job_templates_pod_template_and_the_record_in_one_patch() {
        let changes = [change(ConfigKind::Secret, "db", "main")];
        let w = WorkloadWrite { cronjob_reload: CronJobReload::Patch, ..env_write(&changes, Some("{}")) };
        let hash = ContentHash::NONE.to_string();
        assert_eq!(
            patch_body(&w),
            Some(json!({
                "metadata": {"annotations": {APPLIED_HASHES: "{}"}},
                "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
                    {"name": "main", "env": [{"name": "STAKATER_DB_SECRET", "value": hash}]}]}}}}}
            }))
        );
        let record_only = WorkloadWrite { changes: &[], ..w.clone() };
        assert_eq!(patch_body(&record_only), Some(json!({"metadata": {"annotations": {APPLIED_HASHES: "{}"}}})));
        assert_eq!(patch_body(&WorkloadWrite { applied_hashes: None, ..record_only }), None);
    }

    #[test]
    fn the_cronjob_reload_annotation_is_read_on_cronjobs_only_and_a_bad_value_spawns() {
        let read = |kind: WorkloadKind, value| {
            let (mode, problem) = CronJobReload::from_annotation(kind.facts().cronjob_reload, value);
            (mode, problem.map(|p| p.message))
        };
        assert_eq!(read(WorkloadKind::CronJob, None), (CronJobReload::Spawn, None));
        assert_eq!(read(WorkloadKind::CronJob, Some("patch")), (CronJobReload::Patch, None));
        assert_eq!(read(WorkloadKind::CronJob, Some("spawn")), (CronJobReload::Spawn, None));
        assert_eq!(
            read(WorkloadKind::CronJob, Some("Patch")),
            (
                CronJobReload::Spawn,
                Some(
                    "annotation \"reloader.stakater.com/cronjob-reload\": \"Patch\" is not a CronJob reload \
                     (spawn, patch); a Job is spawned"
                        .to_owned()
                )
            )
        );
        assert_eq!(
            read(WorkloadKind::Deployment, Some("patch")),
            (
                CronJobReload::Spawn,
                Some("Annotation 'reloader.stakater.com/cronjob-reload' only applicable for cronjobs".to_owned())
            )
        );
        let suspended = crate::rules::pause::PauseState { paused: true, ..Default::default() };
        assert!(spawns_nothing(&CronJob::facts(), &suspended, CronJobReload::Spawn));
        assert!(!spawns_nothing(&CronJob::facts(), &suspended, CronJobReload::Patch), "patched as always");
    }

    #[test]
    fn the_job_name_repeats_for_the_same_spawn_and_differs_for_the_next() {
        let changes = [change(ConfigKind::Secret, "db", "main")];
        let w = env_write(&changes, None);
        let before = json!({"metadata": {"name": "nightly", "uid": "u", "annotations": {APPLIED_HASHES: "{\"secret/db\":\"a\"}"}}});
        let after = json!({"metadata": {"name": "nightly", "uid": "u", "annotations": {APPLIED_HASHES: "{\"secret/db\":\"b\"}"}}});
        assert_eq!(job_name(&before, &w), job_name(&before.clone(), &w), "a retry finds the same Job");
        assert_ne!(job_name(&before, &w), job_name(&after, &w), "content flipping back spawns again");
    }
}
