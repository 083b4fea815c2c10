//! CronJobs on the real control plane: a change spawns one Job (upstream's shape) and is remembered across
//! restarts; a suspended one spawns nothing; `cronjob-reload: patch` patches the job template instead. Jobs are
//! `tests/jobs.rs`. Both can be ignored (`IGNORED_WORKLOAD_TYPES`).

mod common;

use common::*;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::{
    ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

const APPLIED: &str = "reloader.stakater.com/applied-hashes";

async fn create_cronjob(ns: &TestNamespace, name: &str, cm: &str) {
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {
            "metadata": {"labels": {"team": "a"}, "annotations": {"note": "from-template"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x",
                "envFrom": [{"configMapRef": {"name": cm}}]}]}}}}}
    }))
    .expect("cronjob");
    api::<CronJob>(ns).create(&PostParams::default(), &cj).await.expect("create cronjob");
}

async fn jobs_owned_by(ns: &TestNamespace, cronjob: &str) -> Vec<Job> {
    let jobs = api::<Job>(ns).list(&Default::default()).await.expect("list jobs");
    jobs.items
        .into_iter()
        .filter(|j| j.owner_references().iter().any(|o| o.kind == "CronJob" && o.name == cronjob))
        .collect()
}

#[tokio::test]
async fn a_cronjob_change_spawns_one_manual_job_and_a_restart_spawns_none() {
    let ns = TestNamespace::create("cronjob").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_cronjob(&ns, "nightly", "cfg").await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    wait_for("the CronJob's applied-hashes baseline", RELOAD_WAIT, || async {
        let cj = api::<CronJob>(&ns).get("nightly").await.map_err(|e| e.to_string())?;
        cj.annotations().get(APPLIED).cloned().ok_or_else(|| "no record yet".to_owned())
    })
    .await;
    assert!(jobs_owned_by(&ns, "nightly").await.is_empty());

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let jobs = wait_for("one Job spawned from the CronJob", RELOAD_WAIT, || async {
        let jobs = jobs_owned_by(&ns, "nightly").await;
        if jobs.len() == 1 { Ok(jobs) } else { Err(format!("{} jobs", jobs.len())) }
    })
    .await;
    let job = &jobs[0];
    assert!(job.name_any().starts_with("nightly-"), "{}", job.name_any());
    assert_eq!(job.annotations().get("cronjob.kubernetes.io/instantiate").map(String::as_str), Some("manual"));
    assert_eq!(job.annotations().get("note").map(String::as_str), Some("from-template"));
    assert_eq!(job.labels().get("team").map(String::as_str), Some("a"));
    assert_eq!(job.owner_references()[0].controller, Some(true));
    assert_carries_hash(job, "k", "2");
    let cj = api::<CronJob>(&ns).get("nightly").await.expect("cronjob");
    let template_env = cj
        .spec
        .and_then(|s| s.job_template.spec)
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers[0].env.clone());
    assert_eq!(template_env, None, "the CronJob itself is never modified (upstream)");
    wait_for("the CronJob to record the new hash", RELOAD_WAIT, || async {
        let cj = api::<CronJob>(&ns).get("nightly").await.map_err(|e| e.to_string())?;
        let record = cj.annotations().get(APPLIED).cloned().unwrap_or_default();
        if record.contains(&configmap_hash(&[("k", "2")])) { Ok(()) } else { Err(record) }
    })
    .await;

    drop(reloader);
    let _restarted = Reloader::start(&ns.name, &[]).await;
    holds_for("no second Job after a restart", QUIET_PERIOD, || async {
        let n = jobs_owned_by(&ns, "nightly").await.len();
        if n == 1 { Ok(()) } else { Err(format!("{n} jobs")) }
    })
    .await;
}

/// A suspended CronJob spawns nothing for a change (issue 29; upstream spawns one, stakater/Reloader#822) and
/// records it, so resuming it spawns no old reload; the next change after that spawns one Job, with its content.
#[tokio::test]
async fn a_suspended_cronjob_spawns_nothing_and_resuming_it_spawns_no_old_change() {
    let ns = TestNamespace::create("cronjob-suspended").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_cronjob(&ns, "nightly", "cfg").await;
    let suspend = |on: bool| {
        let ns = &ns;
        async move {
            let patch = Patch::Merge(json!({"spec": {"suspend": on}}));
            api::<CronJob>(ns).patch("nightly", &PatchParams::default(), &patch).await.expect("suspend");
        }
    };
    suspend(true).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let recorded = |value: &'static str| {
        let ns = &ns;
        async move {
            let cj = api::<CronJob>(ns).get("nightly").await.map_err(|e| e.to_string())?;
            let record = cj.annotations().get(APPLIED).cloned().unwrap_or_default();
            if record.contains(&configmap_hash(&[("k", value)])) { Ok(()) } else { Err(record) }
        }
    };
    wait_for("the CronJob's applied-hashes baseline", RELOAD_WAIT, || recorded("1")).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let line = reloader.wait_log("is suspended: no Job is spawned").await;
    assert!(line.contains("'cfg'") && line.contains("(recorded)"), "{line}");
    wait_for("the CronJob to record the change", RELOAD_WAIT, || recorded("2")).await;
    assert!(jobs_owned_by(&ns, "nightly").await.is_empty(), "a suspended CronJob spawns nothing");

    // Resumed: the controller sees it (a reconcile with nothing to write) and spawns nothing.
    let base = reloader.http_base().await;
    let up_to_date = "reloader_skipped_total{reason=\"strategy_not_updated\"}";
    let before = sample(&http_get(&base, "/metrics").await.1, up_to_date).unwrap_or(0.0);
    suspend(false).await;
    wait_for("a reconcile of the resumed CronJob", RELOAD_WAIT, || async {
        let now = sample(&http_get(&base, "/metrics").await.1, up_to_date).unwrap_or(0.0);
        if now > before { Ok(()) } else { Err(format!("{now} reconciles with nothing to do")) }
    })
    .await;
    assert!(jobs_owned_by(&ns, "nightly").await.is_empty(), "resuming spawns no old change");

    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    let jobs = wait_for("one Job for the change after resuming", RELOAD_WAIT, || async {
        let jobs = jobs_owned_by(&ns, "nightly").await;
        if jobs.len() == 1 { Ok(jobs) } else { Err(format!("{} jobs", jobs.len())) }
    })
    .await;
    assert_carries_hash(&jobs[0], "k", "3");
}

/// `reloader.stakater.com/cronjob-reload: patch` (issue 29, upstream stakater/Reloader#1100): a change patches the job
/// template — the next scheduled run uses it — and spawns nothing, suspended or not.
#[tokio::test]
async fn a_cronjob_with_cronjob_reload_patch_gets_its_job_template_patched_and_spawns_nothing() {
    let ns = TestNamespace::create("cronjob-patch").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_cronjob(&ns, "nightly", "cfg").await;
    let mode = Patch::Merge(json!({"metadata": {"annotations": {"reloader.stakater.com/cronjob-reload": "patch"}}}));
    api::<CronJob>(&ns).patch("nightly", &PatchParams::default(), &mode).await.expect("annotate");
    let reloader = Reloader::start(&ns.name, &[]).await;
    let template_carries = |value: &'static str| {
        let ns = &ns;
        async move {
            let cj = api::<CronJob>(ns).get("nightly").await.map_err(|e| e.to_string())?;
            let env = cj
                .spec
                .and_then(|s| s.job_template.spec)
                .and_then(|s| s.template.spec)
                .and_then(|s| s.containers[0].env.clone())
                .unwrap_or_default();
            let expected = configmap_hash(&[("k", value)]);
            let found = env.iter().any(|e| e.name == "STAKATER_CFG_CONFIGMAP" && e.value.as_deref() == Some(&expected));
            if found { Ok(()) } else { Err(format!("{env:?}")) }
        }
    };

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("the job template to carry the new hash", RELOAD_WAIT, || template_carries("2")).await;
    let line = reloader.wait_log("updated 'nightly' of type").await;
    assert!(line.contains("rollout_strategy=patch"), "{line}");
    assert!(jobs_owned_by(&ns, "nightly").await.is_empty(), "patched, not spawned");

    let suspend = Patch::Merge(json!({"spec": {"suspend": true}}));
    api::<CronJob>(&ns).patch("nightly", &PatchParams::default(), &suspend).await.expect("suspend");
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    wait_for("a suspended CronJob's job template patched too", RELOAD_WAIT, || template_carries("3")).await;
    assert!(jobs_owned_by(&ns, "nightly").await.is_empty(), "patched, not spawned");
}

#[tokio::test]
async fn ignored_workload_types_are_not_reloaded() {
    let ns = TestNamespace::create("ignored-types").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_cronjob(&ns, "nightly", "cfg").await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let _reloader = Reloader::start_with_env(&ns.name, &[], &[("IGNORED_WORKLOAD_TYPES", "jobs,cronjobs")]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    holds_for("no Job from the ignored CronJob", QUIET_PERIOD, || async {
        let n = jobs_owned_by(&ns, "nightly").await.len();
        if n == 0 { Ok(()) } else { Err(format!("{n} jobs")) }
    })
    .await;
}
