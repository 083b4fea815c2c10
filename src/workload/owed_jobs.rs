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
//! limited to a name). Whoever leads finishes what is owed: each entry's Job in the controller's scope is queued
//! when the controller starts reconciling (start, relist, becoming leader), and a reconcile of a Job with an
//! entry settles it first ([`settle`]) — retried by the work queue like any write.
//!
//! An entry outlives its purpose when the process is killed (or its clear fails) after the create: the Job it
//! names exists, and once that Job is gone (`ttlSecondsAfterFinished`, a user) the entry alone would create it
//! again — a migration run twice, days later (issue 38, finding 7). So an entry is settled against the Job under
//! its name, never acted on blindly: a Job with another UID than the one replaced is the recreation, done (the
//! entry goes, whichever reconcile sees it: the one that created it, the next controller's first one, the one its
//! watch event brings); and an entry whose Job is gone is created only within its lifetime, `--rollout-timeout`
//! from when it was recorded — the bound this controller already puts on a write's effect, long enough for a
//! failover or a webhook's short outage, short enough that a Job is never created long after anyone expects it.
//! Past it the entry is dropped with a warning and an Event: a Job lost is said, a Job run twice is not undone.
//!
//! Without the namespace or the permission, a Job reload still works as before, only not crash-safe: said once.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use jiff::Timestamp;
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
    /// When the entry was recorded; `None` in an entry written before entries had a lifetime (0.1.0): of
    /// unknown age, so past its lifetime.
    pub recorded_at: Option<Timestamp>,
}

/// The Job under an owed entry's name, as a live read found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobUnderName<'a> {
    /// Its UID.
    pub uid: Option<&'a str>,
    /// It is being deleted (a finalizer still holds it).
    pub deleting: bool,
}

/// What is to be done with an owed entry ([`settle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Create the owed Job.
    Create,
    /// The replaced Job is still being deleted: look again later.
    Wait,
    /// The entry goes, for this reason.
    Drop(Dropped),
}

/// Why an owed entry was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// A Job with another UID than the replaced one is under the name: the recreation happened.
    Created,
    /// The replaced Job is still there and not being deleted: the DELETE never happened, and an ordinary reload
    /// does it all again.
    NotDeleted,
    /// The Job is gone and the entry older than its lifetime (or of unknown age): given up, so that it is never
    /// created long after its reload.
    Expired,
    /// The Job's namespace is gone or terminating: nothing can be created there.
    NamespaceGone,
}

/// Decides what an owed entry calls for, given the Job now under its name (`None`: no Job there) at `now`. The
/// entry is the intent of one reload; the cluster says whether it was carried out.
pub fn settle(owed: &OwedJob, under_name: Option<JobUnderName<'_>>, now: Timestamp, lifetime: Duration) -> Settled {
    match under_name {
        Some(job) if job.uid != owed.old_uid.as_deref() => Settled::Drop(Dropped::Created),
        Some(job) if job.deleting => Settled::Wait,
        Some(_) => Settled::Drop(Dropped::NotDeleted),
        None if expired(owed.recorded_at, now, lifetime) => Settled::Drop(Dropped::Expired),
        None => Settled::Create,
    }
}

/// Whether an entry recorded at `recorded_at` is past `lifetime` at `now` (one of unknown age is). A clock
/// behind the recording one's (another replica's) makes it younger, never older.
fn expired(recorded_at: Option<Timestamp>, now: Timestamp, lifetime: Duration) -> bool {
    let Some(recorded_at) = recorded_at else { return true };
    let age_ms = now.as_millisecond().saturating_sub(recorded_at.as_millisecond());
    u128::try_from(age_ms).is_ok_and(|age| age > lifetime.as_millis())
}

/// A refusal of an owed Job's create that changes what becomes of the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateRefusal {
    /// The namespace does not exist (404 naming it) or is being terminated (403): the entry goes.
    NamespaceGone,
    /// A ResourceQuota refuses it (`count/jobs`, or the pods' resources): retried until the entry's lifetime
    /// ends, said with a log line and an Event each time.
    Quota,
}

/// Which [`CreateRefusal`] a create error is, if any (by the API server's messages: `namespaces "x" not found`,
/// `… because it is being terminated`, `exceeded quota`).
pub fn create_refusal(e: &kube::Error) -> Option<CreateRefusal> {
    let kube::Error::Api(s) = e else { return None };
    match s.code {
        404 if s.message.starts_with("namespaces ") => Some(CreateRefusal::NamespaceGone),
        403 if s.message.contains("because it is being terminated") => Some(CreateRefusal::NamespaceGone),
        403 if s.message.contains("exceeded quota") => Some(CreateRefusal::Quota),
        _ => None,
    }
}

/// Where owed Job recreations are kept (see the module header).
#[derive(Debug, Default)]
pub struct OwedJobs {
    /// The controller's namespace; `None`: recreations are not recorded.
    namespace: Option<String>,
    /// How long after its recording an entry whose Job is gone may still create it (`--rollout-timeout`).
    lifetime: Duration,
    /// The Jobs with an entry, as last read or written by this process: a cache of the Secret, so that a
    /// reconcile knows without a request whether it has an entry to settle first.
    pending: Mutex<BTreeSet<WorkloadKey>>,
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
    Some(WorkloadKey { kind: OwedJobs::KIND, namespace: namespace.into(), name: name.to_owned() })
}

/// An entry's value as stored.
fn encode(owed: &OwedJob) -> String {
    let recorded_at = owed.recorded_at.map(|t| t.to_string());
    json!({"oldUid": owed.old_uid, "recordedAt": recorded_at, "job": owed.job}).to_string()
}

/// An entry's value as read.
fn decode(bytes: &[u8]) -> Result<OwedJob, serde_json::Error> {
    let mut value: Value = serde_json::from_slice(bytes)?;
    let old_uid = value["oldUid"].as_str().map(str::to_owned);
    let recorded_at = value["recordedAt"].as_str().and_then(|t| t.parse().ok());
    Ok(OwedJob { old_uid, job: value["job"].take(), recorded_at })
}

impl OwedJobs {
    /// The kind whose recreations are recorded: Jobs, the kind a reload deletes and creates again
    /// (`WriteStyle::Recreate`). The ledger is theirs alone: an entry is named `<namespace>.<name>`, without a kind.
    pub const KIND: WorkloadKind = WorkloadKind::Job;

    /// Owed recreations kept in `namespace` (none recorded when it is empty), each creatable for `lifetime` after
    /// it was recorded.
    pub fn new(namespace: &str, lifetime: Duration) -> Self {
        Self {
            namespace: Some(namespace.to_owned()).filter(|n| !n.is_empty()),
            lifetime,
            pending: Mutex::default(),
            warned: AtomicBool::new(false),
        }
    }

    fn api(&self, client: &Client) -> Option<Api<Secret>> {
        self.namespace.as_deref().map(|ns| Api::namespaced(client.clone(), ns))
    }

    fn pending_keys(&self) -> MutexGuard<'_, BTreeSet<WorkloadKey>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
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
        let value = encode(owed);
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
            Ok(()) => {
                self.pending_keys().insert(key.clone());
                true
            }
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

    /// Every owed recreation (and, from it, which Jobs have one: [`Self::pending`]).
    pub async fn all(&self, client: &Client) -> Result<BTreeMap<WorkloadKey, OwedJob>, kube::Error> {
        let Some(api) = self.api(client) else { return Ok(BTreeMap::new()) };
        let secret = api.get_opt(OWED_JOBS_SECRET).await?;
        let entries = secret.and_then(|s| s.data).unwrap_or_default().into_iter().filter_map(|(entry, bytes)| {
            let Some(key) = workload_key(&entry) else {
                warn!(secret = OWED_JOBS_SECRET, entry, "not an owed Job recreation (no namespace in the key)");
                return None;
            };
            match decode(&bytes.0) {
                Ok(owed) => Some((key, owed)),
                Err(e) => {
                    warn!(secret = OWED_JOBS_SECRET, entry, "cannot read the owed recreation of Job {key}: {e}");
                    None
                }
            }
        });
        let entries: BTreeMap<_, _> = entries.collect();
        *self.pending_keys() = entries.keys().cloned().collect();
        Ok(entries)
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
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
        self.pending_keys().remove(key);
        Ok(())
    }

    /// Whether recreations are recorded at all.
    pub fn enabled(&self) -> bool {
        self.namespace.is_some()
    }

    /// Whether a recreation may be owed for `key` (a Job, where recreations are recorded).
    pub fn may_owe(&self, key: &WorkloadKey) -> bool {
        self.enabled() && key.kind == Self::KIND
    }

    /// Whether `key` had an entry when this process last read or wrote the Secret: its reconcile settles it
    /// first ([`settle`]).
    pub fn pending(&self, key: &WorkloadKey) -> bool {
        self.may_owe(key) && self.pending_keys().contains(key)
    }

    /// How long after its recording an entry whose Job is gone may still create it.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
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

    fn owed(old_uid: &str, recorded_at: Option<&str>) -> OwedJob {
        OwedJob {
            old_uid: Some(old_uid.to_owned()),
            job: json!({"metadata": {"name": "migrate"}}),
            recorded_at: recorded_at.map(|t| t.parse().expect("timestamp")),
        }
    }

    const LIFETIME: Duration = Duration::from_secs(600);

    fn at(t: &str) -> Timestamp {
        t.parse().expect("timestamp")
    }

    /// Issue 38, finding 7: an entry left after its create (a kill or a failed clear before the clear) is done
    /// as soon as any reconcile sees the new Job, whatever its age.
    #[test]
    fn an_entry_whose_job_has_another_uid_is_done() {
        let entry = owed("old", Some("2026-12-06T10:00:00Z"));
        let new = JobUnderName { uid: Some("new"), deleting: false };
        assert_eq!(settle(&entry, Some(new), at("2026-12-06T10:00:01Z"), LIFETIME), Settled::Drop(Dropped::Created));
        assert_eq!(settle(&entry, Some(new), at("2026-12-09T10:00:00Z"), LIFETIME), Settled::Drop(Dropped::Created));
    }

    #[test]
    fn an_entry_whose_old_job_is_still_there_waits_for_its_deletion_or_goes() {
        let entry = owed("old", Some("2026-12-06T10:00:00Z"));
        let now = at("2026-12-06T10:00:01Z");
        let deleting = JobUnderName { uid: Some("old"), deleting: true };
        assert_eq!(settle(&entry, Some(deleting), now, LIFETIME), Settled::Wait, "a finalizer holds it");
        let kept = JobUnderName { uid: Some("old"), deleting: false };
        assert_eq!(settle(&entry, Some(kept), now, LIFETIME), Settled::Drop(Dropped::NotDeleted));
    }

    /// Issue 38, finding 7: a Job gone is created from its entry only within the entry's lifetime; past it (the
    /// Job created, run and removed by its TTL while no controller cleared the entry) it never is.
    #[test]
    fn an_entry_whose_job_is_gone_creates_it_only_within_its_lifetime() {
        let entry = owed("old", Some("2026-12-06T10:00:00Z"));
        assert_eq!(settle(&entry, None, at("2026-12-06T10:00:05Z"), LIFETIME), Settled::Create);
        assert_eq!(settle(&entry, None, at("2026-12-06T10:10:00Z"), LIFETIME), Settled::Create, "at its end");
        assert_eq!(settle(&entry, None, at("2026-12-06T10:10:01Z"), LIFETIME), Settled::Drop(Dropped::Expired));
        assert_eq!(settle(&entry, None, at("2026-12-08T10:00:00Z"), LIFETIME), Settled::Drop(Dropped::Expired));
        // Another replica's clock ahead of this one's: younger, not older.
        assert_eq!(settle(&entry, None, at("2026-12-06T09:59:00Z"), LIFETIME), Settled::Create);
        // An entry of 0.1.0 has no time: of unknown age, never created blindly.
        assert_eq!(
            settle(&owed("old", None), None, at("2026-12-06T10:00:00Z"), LIFETIME),
            Settled::Drop(Dropped::Expired)
        );
    }

    #[test]
    fn an_entry_survives_its_round_trip_and_reads_without_a_time() {
        let entry = owed("old", Some("2026-12-06T10:00:00Z"));
        assert_eq!(decode(encode(&entry).as_bytes()).expect("decode"), entry);
        let legacy = br#"{"oldUid": "old", "job": {"metadata": {"name": "migrate"}}}"#;
        assert_eq!(decode(legacy).expect("decode"), owed("old", None));
        assert!(decode(b"not json").is_err());
    }

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(kube::core::Status { code, message: message.into(), ..Default::default() }.boxed())
    }

    /// Issue 38, finding 7: an entry of a deleted namespace goes (it stayed forever); a quota's refusal is told
    /// apart from other refusals.
    #[test]
    fn create_refusals_name_a_gone_namespace_and_a_quota() {
        let gone = api_error(404, "namespaces \"team-a\" not found");
        assert_eq!(create_refusal(&gone), Some(CreateRefusal::NamespaceGone));
        let terminating = api_error(
            403,
            "jobs.batch \"migrate\" is forbidden: unable to create new content in namespace team-a because it is being terminated",
        );
        assert_eq!(create_refusal(&terminating), Some(CreateRefusal::NamespaceGone));
        let quota = api_error(
            403,
            "jobs.batch \"migrate\" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1",
        );
        assert_eq!(create_refusal(&quota), Some(CreateRefusal::Quota));
        assert_eq!(create_refusal(&api_error(403, "jobs.batch is forbidden: User cannot create")), None);
        assert_eq!(create_refusal(&api_error(503, "webhook down")), None);
    }
}
