//! Job recreations owed (issue 27, finding 1): a Job reload deletes the Job and creates it again under the same
//! name, and between the two the Job exists nowhere — not in the cluster, not in the watch. A controller that
//! crashes, is killed or loses leadership there, or whose create is refused for longer than one reconcile, would
//! lose the user's Job for good. So before the DELETE, the Job to create is written into the cluster: one entry
//! per Job in one Secret, `reloader-owed-jobs`, in the controller's namespace (`RELOADER_NAMESPACE`, which the
//! chart always sets). The entry goes once the new Job exists.
//!
//! Why there: the old object cannot hold the intent (the new Job needs its name, so it must be gone first); the
//! Job's own namespace would need write access to every namespace; a Secret rather than a ConfigMap because a
//! Job's spec may carry credentials in plain env values, and the controller's namespace is the one place its
//! ServiceAccount gets a Role of its own (one fixed name: `get`/`patch` on it, and `create`, which cannot be
//! limited to a name). Whoever leads finishes what is owed: each entry's Job is queued when the controller
//! starts reconciling (start, relist, becoming leader), and a Job reconcile that finds its Job gone creates it
//! from the entry — retried by the work queue like any write.
//!
//! Without the namespace or the permission, a Job reload still works as before, only not crash-safe: said once.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
};

use k8s_openapi::{api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::{WorkloadKey, WorkloadKind};
use crate::constants::{FIELD_MANAGER, OWED_JOBS_SECRET};

/// One owed recreation: the Job to create, and the UID of the one it replaces (a Job under the name with
/// another UID is the recreation, done).
#[derive(Clone, Debug, PartialEq)]
pub struct OwedJob {
    /// The deleted Job's UID.
    pub old_uid: Option<String>,
    /// The Job to create, as JSON.
    pub job: Value,
}

/// Where owed Job recreations are kept (see the module header).
#[derive(Debug, Default)]
pub struct OwedJobs {
    /// The controller's namespace; `None`: recreations are not recorded.
    namespace: Option<String>,
    /// The "not crash-safe" warning was logged.
    warned: AtomicBool,
}

/// What the Secret's data key for a Job is: `<namespace>.<name>` (a namespace has no dot, so the first dot
/// splits it; both are valid Secret data key characters).
fn entry_key(key: &WorkloadKey) -> String {
    format!("{}.{}", key.namespace, key.name)
}

fn workload_key(entry: &str) -> Option<WorkloadKey> {
    let (namespace, name) = entry.split_once('.')?;
    Some(WorkloadKey { kind: WorkloadKind::Job, namespace: namespace.into(), name: name.to_owned() })
}

impl OwedJobs {
    /// Owed recreations kept in `namespace` (none recorded when it is empty).
    pub fn new(namespace: &str) -> Self {
        Self { namespace: Some(namespace.to_owned()).filter(|n| !n.is_empty()), warned: AtomicBool::new(false) }
    }

    fn api(&self, client: &Client) -> Option<Api<Secret>> {
        self.namespace.as_deref().map(|ns| Api::namespaced(client.clone(), ns))
    }

    fn not_crash_safe(&self, why: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            warn!(
                secret = OWED_JOBS_SECRET,
                namespace = self.namespace.as_deref().unwrap_or_default(),
                "Job recreation is not crash-safe: {why}; a Job deleted for a reload is created again by this \
                   process only, so a crash or failover at that moment loses it (grant get/patch on Secret \
                   {OWED_JOBS_SECRET} and create on Secrets in the controller's namespace)"
            );
        } else {
            debug!("Job recreation is not crash-safe: {why}");
        }
    }

    /// Records that `key` is to be created as `owed`, before its old Job is deleted. False when it could not
    /// be recorded (no namespace, refused): the reload goes on, as before, without that safety.
    pub async fn record(&self, client: &Client, key: &WorkloadKey, owed: &OwedJob) -> bool {
        let Some(api) = self.api(client) else {
            self.not_crash_safe("RELOADER_NAMESPACE is not set");
            return false;
        };
        let value = json!({"oldUid": owed.old_uid, "job": owed.job}).to_string();
        let body = json!({"stringData": {entry_key(key): value}});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        let mut result = api.patch(OWED_JOBS_SECRET, &params, &Patch::Merge(&body)).await.map(|_| ());
        if matches!(&result, Err(kube::Error::Api(s)) if s.code == 404) {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(OWED_JOBS_SECRET.into()),
                    labels: Some([("app.kubernetes.io/managed-by".to_owned(), FIELD_MANAGER.to_owned())].into()),
                    ..ObjectMeta::default()
                },
                string_data: Some([(entry_key(key), value)].into()),
                ..Secret::default()
            };
            let create = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
            result = match api.create(&create, &secret).await {
                // Created meanwhile by another write: add the entry to it.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    api.patch(OWED_JOBS_SECRET, &params, &Patch::Merge(&body)).await.map(|_| ())
                }
                other => other.map(|_| ()),
            };
        }
        match result {
            Ok(()) => true,
            Err(e) => {
                self.not_crash_safe(&format!("recording the recreation of Job {key} failed: {e}"));
                false
            }
        }
    }

    /// The recreation owed for `key`, if any.
    pub async fn get(&self, client: &Client, key: &WorkloadKey) -> Result<Option<OwedJob>, kube::Error> {
        Ok(self.all(client).await?.remove(key))
    }

    /// Every owed recreation.
    pub async fn all(&self, client: &Client) -> Result<BTreeMap<WorkloadKey, OwedJob>, kube::Error> {
        let Some(api) = self.api(client) else { return Ok(BTreeMap::new()) };
        let Some(secret) = api.get_opt(OWED_JOBS_SECRET).await? else { return Ok(BTreeMap::new()) };
        let entries = secret.data.unwrap_or_default().into_iter().filter_map(|(entry, bytes)| {
            let Some(key) = workload_key(&entry) else {
                warn!(secret = OWED_JOBS_SECRET, entry, "not an owed Job recreation (no namespace in the key)");
                return None;
            };
            let mut value: Value = match serde_json::from_slice(&bytes.0) {
                Ok(v) => v,
                Err(e) => {
                    warn!(secret = OWED_JOBS_SECRET, entry, "cannot read the owed recreation of Job {key}: {e}");
                    return None;
                }
            };
            let old_uid = value["oldUid"].as_str().map(str::to_owned);
            Some((key, OwedJob { old_uid, job: value["job"].take() }))
        });
        Ok(entries.collect())
    }

    /// The Jobs something is owed for (none when they cannot be read: said once).
    pub async fn owed_keys(&self, client: &Client) -> Vec<WorkloadKey> {
        match self.all(client).await {
            Ok(owed) => owed.into_keys().collect(),
            Err(e) => {
                self.not_crash_safe(&format!("reading Secret {OWED_JOBS_SECRET} failed: {e}"));
                Vec::new()
            }
        }
    }

    /// The recreation of `key` is done (or no longer owed).
    pub async fn clear(&self, client: &Client, key: &WorkloadKey) -> Result<(), kube::Error> {
        let Some(api) = self.api(client) else { return Ok(()) };
        let body = json!({"data": {entry_key(key): null}});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        match api.patch(OWED_JOBS_SECRET, &params, &Patch::Merge(&body)).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Whether recreations are recorded at all.
    pub fn enabled(&self) -> bool {
        self.namespace.is_some()
    }

    /// Whether a recreation may be owed for `key` (a Job, where recreations are recorded).
    pub fn may_owe(&self, key: &WorkloadKey) -> bool {
        self.enabled() && key.kind == WorkloadKind::Job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_key_names_namespace_and_job() {
        let key = WorkloadKey { kind: WorkloadKind::Job, namespace: "team-a".into(), name: "db.migrate".into() };
        assert_eq!(entry_key(&key), "team-a.db.migrate");
        assert_eq!(workload_key("team-a.db.migrate"), Some(key));
        assert_eq!(workload_key("nodot"), None);
    }
}
