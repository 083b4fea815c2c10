//! Jobs on the real control plane: a Job is deleted and recreated with the new template, only once its
//! recreation would be admitted, and what a crash leaves owed (`reloader-owed-jobs`) is settled against the Job
//! under its name: created by the next controller, never twice, never after its lifetime, only in scope.

mod common;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use kube::{Api, ResourceExt, api::PostParams};
use serde_json::json;

/// Job `migrate` of namespace `ns`, reloaded with ConfigMap `cfg`, as its manifest says it.
fn migrate_job(ns: &str) -> serde_json::Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "migrate", "namespace": ns, "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x",
            "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    })
}

/// ConfigMap `cfg` (`k=1`) and Job `migrate` (auto) using it; returns the Jobs API and the Job's UID.
async fn create_migrate_job(ns: &TestNamespace) -> (Api<Job>, Option<String>) {
    create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
    let job: Job = serde_json::from_value(migrate_job(&ns.name)).expect("job");
    let jobs: Api<Job> = api(ns);
    let old_uid = jobs.create(&PostParams::default(), &job).await.expect("create job").uid();
    (jobs, old_uid)
}

#[tokio::test]
async fn a_job_is_recreated_with_the_new_template() {
    let ns = TestNamespace::create("job").await;
    let (jobs, old_uid) = create_migrate_job(&ns).await;
    let _reloader = Reloader::start(&ns.name, &[]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let recreated = wait_for("the Job recreated with the new hash", RELOAD_WAIT, || async {
        let j = jobs.get("migrate").await.map_err(|e| e.to_string())?;
        if j.uid() == old_uid {
            return Err("still the old Job".into());
        }
        Ok(j)
    })
    .await;
    assert_carries_hash(&recreated, "k", "2");
    wait_for("the recreated Job to complete", RELOAD_WAIT, || async {
        let j = jobs.get("migrate").await.map_err(|e| e.to_string())?;
        let s = j.status.unwrap_or_default();
        if s.succeeded == Some(1) { Ok(()) } else { Err(format!("{s:?}")) }
    })
    .await;
}

/// Issue 27, finding 1: a Job is deleted only once its recreation would be admitted. While a webhook refuses Job
/// creates, the user's Job stays as it is and the reload is retried; once creates are admitted it is recreated,
/// once. Before, the Job was deleted, the create failed, and the Job was gone.
#[tokio::test]
async fn a_job_whose_recreation_would_be_refused_is_kept_until_it_can_be_recreated() {
    use common::webhook::{Refused, RefusingWebhook};

    let ns = TestNamespace::create("job-refused").await;
    let (jobs, old_uid) = create_migrate_job(&ns).await;
    let reloader = Reloader::start(&ns.name, &["--max-retry-backoff=2s"]).await;
    let webhook = RefusingWebhook::refusing(&ns, 503, Refused::JobCreates).await;
    let probed = webhook.calls();

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("the controller's Job creates refused, and retried", RELOAD_WAIT, || async {
        let refused = webhook.calls() - probed;
        if refused >= 2 { Ok(()) } else { Err(format!("{refused} refused so far")) }
    })
    .await;
    let kept = jobs.get_opt("migrate").await.expect("get job").map(|j| j.uid());
    assert_eq!(kept, Some(old_uid.clone()), "the Job was deleted although its recreation is refused");

    drop(webhook);
    let recreated = wait_recreated(&jobs, &old_uid).await;
    holds_one_recreation(&jobs, &recreated).await;
    assert_eq!(reloader.count_log("updated 'migrate'"), 1, "{:#?}", reloader.logs());
}

/// The entries of the controller's owed Job recreations (`reloader-owed-jobs` in `ns`).
async fn owed_entries(ns: &TestNamespace) -> Vec<String> {
    let secret = api::<k8s_openapi::api::core::v1::Secret>(ns).get_opt("reloader-owed-jobs").await.expect("get");
    secret.and_then(|s| s.data).map(|d| d.into_keys().collect()).unwrap_or_default()
}

/// Waits for Job `migrate` to exist again under another UID than `old_uid`, carrying `cfg`'s new hash.
async fn wait_recreated(jobs: &Api<Job>, old_uid: &Option<String>) -> Job {
    let recreated = wait_for("the Job recreated with the new hash", RELOAD_WAIT, || async {
        let j = jobs.get_opt("migrate").await.map_err(|e| e.to_string())?.ok_or("no Job 'migrate'")?;
        if j.uid() == *old_uid { Err("still the old Job".into()) } else { Ok(j) }
    })
    .await;
    assert_carries_hash(&recreated, "k", "2");
    recreated
}

/// `recreated` stays the Job for [`QUIET_PERIOD`]: one recreation, not two.
async fn holds_one_recreation(jobs: &Api<Job>, recreated: &Job) {
    holds_for("one recreation", QUIET_PERIOD, || async {
        let uid = jobs.get("migrate").await.map_err(|e| e.to_string())?.uid();
        if uid == recreated.uid() { Ok(()) } else { Err(format!("recreated again: {uid:?}")) }
    })
    .await;
}

/// Waits until nothing is owed any more in `ns`.
async fn wait_owed_cleared(ns: &TestNamespace) {
    wait_for("the owed entry cleared", RELOAD_WAIT, || async {
        let entries = owed_entries(ns).await;
        if entries.is_empty() { Ok(()) } else { Err(format!("{entries:?}")) }
    })
    .await;
}

/// Issue 27, finding 1: a controller killed between deleting a Job for a reload and creating it again must not
/// lose the Job. The create is admitted (its dry run passes) but refused, so the first controller deletes the
/// Job and cannot create it; it is killed there. The next controller, started once creates are accepted,
/// creates the Job with the new template from what the first recorded in the cluster.
#[tokio::test]
async fn a_job_deleted_for_a_reload_is_created_by_the_next_controller_after_a_crash() {
    use common::webhook::{Refused, RefusingWebhook};

    let ns = TestNamespace::create("job-owed").await;
    let (jobs, old_uid) = create_migrate_job(&ns).await;
    let webhook = RefusingWebhook::refusing(&ns, 503, Refused::JobCreatesExceptDryRuns).await;
    let own_namespace = [("RELOADER_NAMESPACE", ns.name.as_str())];
    let mut first = Reloader::start_with_env(&ns.name, &[], &own_namespace).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("the Job deleted for the reload", RELOAD_WAIT, || async {
        match jobs.get_opt("migrate").await.map_err(|e| e.to_string())? {
            Some(j) => Err(format!("still there: {:?}", j.uid())),
            None => Ok(()),
        }
    })
    .await;
    first.kill();
    let entry = format!("{}.migrate", ns.name);
    assert_eq!(owed_entries(&ns).await, vec![entry.clone()], "the recreation is recorded before the delete");

    drop(webhook);
    let second = Reloader::start_with_env(&ns.name, &[], &own_namespace).await;
    let recreated = wait_recreated(&jobs, &old_uid).await;
    wait_owed_cleared(&ns).await;
    holds_one_recreation(&jobs, &recreated).await;
    assert_eq!(second.count_log("created Job 'migrate' in namespace"), 1, "{:#?}", second.logs());
}

/// A Job whose create keeps failing after the delete (longer than one write retries it) is created by a later
/// attempt of the work queue once creates succeed: the Job is no longer in the watch, and the owed entry is
/// what that attempt creates it from (before, the retry found no workload and the Job was lost).
#[tokio::test]
async fn a_job_whose_create_fails_for_longer_than_one_write_is_created_when_it_can_be() {
    use common::webhook::{Refused, RefusingWebhook};

    let ns = TestNamespace::create("job-owed-late").await;
    let (jobs, old_uid) = create_migrate_job(&ns).await;
    let webhook = RefusingWebhook::refusing(&ns, 503, Refused::JobCreatesExceptDryRuns).await;
    let reloader =
        Reloader::start_with_env(&ns.name, &["--max-retry-backoff=2s"], &[("RELOADER_NAMESPACE", &ns.name)]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    // The write gave up (its in-line retries of the create end after 15 s): the queue retries it.
    let retried = |l: &String| l.contains("reload failed, retrying") && l.contains("migrate");
    wait_for("the write given up", 2 * RELOAD_WAIT, || async {
        if reloader.logs().iter().any(retried) { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    assert!(jobs.get_opt("migrate").await.expect("get").is_none(), "the Job was deleted for the reload");

    drop(webhook);
    wait_recreated(&jobs, &old_uid).await;
    wait_owed_cleared(&ns).await;
}

/// Writes the owed recreation of Job `migrate` into `reloader-owed-jobs` in `ns`, as the controller records it
/// before deleting the Job `old_uid` names: at `recorded_at`, the Job to create being `migrate`'s manifest.
async fn write_owed_entry(ns: &TestNamespace, old_uid: &str, recorded_at: jiff::Timestamp) {
    write_owed_entries(ns, &[(&ns.name, old_uid, recorded_at)]).await;
}

/// [`write_owed_entry`] for Jobs `migrate` of several namespaces: (namespace, old UID, recorded at).
async fn write_owed_entries(ns: &TestNamespace, entries: &[(&str, &str, jiff::Timestamp)]) {
    let data: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(namespace, old_uid, recorded_at)| {
            let value =
                json!({"oldUid": old_uid, "recordedAt": recorded_at.to_string(), "job": migrate_job(namespace)});
            (format!("{namespace}.migrate"), json!(value.to_string()))
        })
        .collect();
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(json!({"metadata": {"name": "reloader-owed-jobs"}, "stringData": data}))
            .expect("secret");
    api(ns).create(&PostParams::default(), &secret).await.expect("create owed-jobs secret");
}

/// Deletes Job `migrate` (as its `ttlSecondsAfterFinished` or a user would) and waits until it is gone.
async fn delete_migrate_job(jobs: &Api<Job>) {
    jobs.delete("migrate", &kube::api::DeleteParams::background()).await.expect("delete job");
    wait_for("Job 'migrate' gone", RELOAD_WAIT, || async {
        match jobs.get_opt("migrate").await.map_err(|e| e.to_string())? {
            Some(j) => Err(format!("still there: {:?}", j.uid())),
            None => Ok(()),
        }
    })
    .await;
}

/// Issue 38, finding 7: a controller killed after creating a Job for a reload and before clearing its owed entry
/// leaves both: the new Job and the entry naming the Job it replaced. The next controller must see that the
/// recreation happened (a Job with another UID is under the name) and drop the entry; once the Job is gone
/// (its TTL, a user), no controller creates it again. Before, the entry stayed, and the first controller
/// started after the Job was gone created it again — a migration run twice.
#[tokio::test]
async fn an_owed_entry_left_after_its_create_never_creates_the_job_again() {
    let ns = TestNamespace::create("job-owed-stale").await;
    let (jobs, replaced_uid) = create_migrate_job(&ns).await;
    // What the kill leaves: the replaced Job deleted, its recreation created, the entry still there.
    delete_migrate_job(&jobs).await;
    let job: Job = serde_json::from_value(migrate_job(&ns.name)).expect("job");
    let created = jobs.create(&PostParams::default(), &job).await.expect("create the recreation").uid();
    let replaced_uid = replaced_uid.expect("uid");
    write_owed_entry(&ns, &replaced_uid, jiff::Timestamp::now()).await;

    let own_namespace = [("RELOADER_NAMESPACE", ns.name.as_str())];
    let mut first = Reloader::start_with_env(&ns.name, &[], &own_namespace).await;
    wait_owed_cleared(&ns).await;
    first.wait_log("its owed recreation is done").await;
    assert_eq!(jobs.get("migrate").await.expect("get").uid(), created, "the recreation is left as it is");
    first.kill();

    delete_migrate_job(&jobs).await;
    let second = Reloader::start_with_env(&ns.name, &[], &own_namespace).await;
    assert!(owed_entries(&ns).await.is_empty(), "nothing is owed any more");
    holds_for("no Job created again", QUIET_PERIOD, || async {
        match jobs.get_opt("migrate").await.map_err(|e| e.to_string())? {
            Some(j) => Err(format!("Job 'migrate' created again: {:?}", j.uid())),
            None => Ok(()),
        }
    })
    .await;
    assert_eq!(second.count_log("created Job 'migrate' in namespace"), 0, "{:#?}", second.logs());
}

/// Issue 38, finding 7: an entry whose Job is gone and whose reload is older than its lifetime (`--rollout-timeout`)
/// is given up, said in the log and by an Event, and never creates its Job: it was left a day ago by a controller
/// killed after the create, and the Job it created has since run and been removed by its TTL. Before, the next
/// controller created the Job from it, a day late.
#[tokio::test]
async fn an_owed_entry_past_its_lifetime_is_given_up() {
    use k8s_openapi::api::core::v1::Event;

    let ns = TestNamespace::create("job-owed-expired").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let a_day_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
    write_owed_entry(&ns, "a-job-deleted-a-day-ago", a_day_ago).await;

    let reloader = Reloader::start_with_env(&ns.name, &[], &[("RELOADER_NAMESPACE", ns.name.as_str())]).await;
    let line = reloader.wait_log("is not created again now").await;
    assert!(line.contains("'migrate'") && line.contains("--rollout-timeout"), "{line}");
    wait_owed_cleared(&ns).await;
    let jobs: Api<Job> = api(&ns);
    holds_for("no Job created from the outdated entry", QUIET_PERIOD, || async {
        match jobs.get_opt("migrate").await.map_err(|e| e.to_string())? {
            Some(j) => Err(format!("Job 'migrate' created: {:?}", j.uid())),
            None => Ok(()),
        }
    })
    .await;
    wait_for("a RecreateAbandoned Event on the Job", RELOAD_WAIT, || async {
        let events = api::<Event>(&ns).list(&Default::default()).await.map_err(|e| e.to_string())?;
        let found = events.items.iter().any(|e| {
            e.reason.as_deref() == Some("RecreateAbandoned") && e.involved_object.name.as_deref() == Some("migrate")
        });
        if found { Ok(()) } else { Err(format!("{} events", events.items.len())) }
    })
    .await;
}

/// Issue 38, finding 7: the owed-jobs Secret is shared by every controller of its namespace. An entry of a
/// namespace this controller does not watch is left alone (never created here); one of a watched namespace that no
/// longer exists is dropped, said once. Before, the first was created by whichever controller started, and the
/// second stayed forever, its create retried.
#[tokio::test]
async fn owed_entries_out_of_scope_are_left_and_of_a_deleted_namespace_dropped() {
    let ns = TestNamespace::create("job-owed-scope").await;
    let theirs = TestNamespace::create("job-owed-theirs").await;
    let gone = format!("{}-gone", ns.name);
    let now = jiff::Timestamp::now();
    write_owed_entries(&ns, &[(&theirs.name, "their-replaced-job", now), (&gone, "a-replaced-job", now)]).await;

    let scope = format!("--namespaces={},{gone}", ns.name);
    let reloader = Reloader::start_unscoped(&[scope.as_str()], &[("RELOADER_NAMESPACE", ns.name.as_str())]).await;
    let line = reloader.wait_log(&format!("namespace '{gone}' is gone")).await;
    assert!(line.contains("owed recreation of Job 'migrate' is dropped"), "{line}");
    wait_for("only the deleted namespace's entry dropped", RELOAD_WAIT, || async {
        let entries = owed_entries(&ns).await;
        if entries == vec![format!("{}.migrate", theirs.name)] { Ok(()) } else { Err(format!("{entries:?}")) }
    })
    .await;
    let their_jobs: Api<Job> = api(&theirs);
    holds_for("no Job created in a namespace out of scope", QUIET_PERIOD, || async {
        match their_jobs.get_opt("migrate").await.map_err(|e| e.to_string())? {
            Some(j) => Err(format!("Job 'migrate' created in {}: {:?}", theirs.name, j.uid())),
            None => Ok(()),
        }
    })
    .await;
}

/// Issue 38, finding 7: a Job owed (deleted for a reload) whose create a ResourceQuota refuses (`count/jobs`, its
/// one slot taken by another Job meanwhile) is said in the log and by a `RecreateRefused` Event, and the entry is
/// kept and retried: once the quota has room, within the entry's lifetime, the Job is created, once.
#[tokio::test]
async fn an_owed_job_refused_by_a_quota_is_said_and_created_once_there_is_room() {
    use k8s_openapi::api::core::v1::{Event, ResourceQuota};

    let ns = TestNamespace::create("job-owed-quota").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "jobs"}, "spec": {"hard": {"count/jobs.batch": "1"}}
    }))
    .expect("quota");
    let quotas: Api<ResourceQuota> = api(&ns);
    quotas.create(&PostParams::default(), &quota).await.expect("create quota");
    wait_for("the quota's status", RELOAD_WAIT, || async {
        let q = quotas.get("jobs").await.map_err(|e| e.to_string())?;
        let hard = q.status.and_then(|s| s.hard).unwrap_or_default();
        if hard.contains_key("count/jobs.batch") { Ok(()) } else { Err("no status yet".to_owned()) }
    })
    .await;
    let mut other = migrate_job(&ns.name);
    other["metadata"] = json!({"name": "other", "namespace": ns.name});
    let jobs: Api<Job> = api(&ns);
    jobs.create(&PostParams::default(), &serde_json::from_value(other).expect("job")).await.expect("create other");
    wait_for("the quota to count the other Job", RELOAD_WAIT, || async {
        let q = quotas.get("jobs").await.map_err(|e| e.to_string())?;
        let used = q.status.and_then(|s| s.used).unwrap_or_default();
        match used.get("count/jobs.batch") {
            Some(n) if n.0 == "1" => Ok(()),
            n => {
                // Admission charges a create only when its cache of quotas already holds this one (a fresh clone's
                // run once saw `used` stay 0 for 30 s); a change to the quota's `spec.hard` (a limit nothing here
                // reaches) makes kube-controller-manager recount it.
                let limit = (100_000 + jiff::Timestamp::now().as_second() % 1000).to_string();
                let touch = json!({"spec": {"hard": {"count/secrets": limit}}});
                let _ =
                    quotas.patch("jobs", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&touch)).await;
                Err(format!("used {n:?}"))
            }
        }
    })
    .await;
    write_owed_entry(&ns, "the-replaced-job", jiff::Timestamp::now()).await;

    let reloader =
        Reloader::start_with_env(&ns.name, &["--max-retry-backoff=2s"], &[("RELOADER_NAMESPACE", ns.name.as_str())])
            .await;
    let line = reloader.wait_log("a ResourceQuota refuses its new Job").await;
    assert!(line.contains("'migrate'") && line.contains("exceeded quota"), "{line}");
    wait_for("a RecreateRefused Event on the Job", RELOAD_WAIT, || async {
        let events = api::<Event>(&ns).list(&Default::default()).await.map_err(|e| e.to_string())?;
        let found = events.items.iter().any(|e| {
            e.reason.as_deref() == Some("RecreateRefused") && e.involved_object.name.as_deref() == Some("migrate")
        });
        if found { Ok(()) } else { Err(format!("{} events", events.items.len())) }
    })
    .await;
    assert!(jobs.get_opt("migrate").await.expect("get").is_none());
    assert_eq!(owed_entries(&ns).await, vec![format!("{}.migrate", ns.name)], "kept while refused");

    jobs.delete("other", &kube::api::DeleteParams::background()).await.expect("delete other");
    let created = wait_for("the owed Job created once the quota has room", 2 * RELOAD_WAIT, || async {
        jobs.get_opt("migrate").await.map_err(|e| e.to_string())?.ok_or_else(|| "not yet".to_owned())
    })
    .await;
    wait_owed_cleared(&ns).await;
    holds_one_recreation(&jobs, &created).await;
}
