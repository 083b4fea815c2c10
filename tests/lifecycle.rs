//! Behaviour across time and restarts on the real control plane: pause periods, restart safety, coalescing,
//! `--sync-after-restart`.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use serde_json::json;

const APPLIED: &str = "reloader.stakater.com/applied-hashes";
const PAUSED_AT: &str = "deployment.reloader.stakater.com/paused-at";

fn auto() -> serde_json::Value {
    json!({"reloader.stakater.com/auto": "true"})
}

async fn pause_state(ns: &TestNamespace, name: &str) -> (bool, Option<String>) {
    let d = api::<Deployment>(ns).get(name).await.expect("deployment");
    (d.spec.and_then(|s| s.paused).unwrap_or(false), d.metadata.annotations.and_then(|a| a.get(PAUSED_AT).cloned()))
}

async fn wait_applied_record(ns: &TestNamespace, name: &str) {
    wait_for(&format!("{name}'s applied-hashes record"), RELOAD_WAIT, || async {
        let d = api::<Deployment>(ns).get(name).await.map_err(|e| e.to_string())?;
        d.annotations().get(APPLIED).map(|_| ()).ok_or_else(|| "not yet".to_owned())
    })
    .await;
}

#[tokio::test]
async fn a_paused_deployment_resumes_after_its_period_even_across_a_restart() {
    let ns = TestNamespace::create("pause").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let meta = json!({"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": "6s"});
    Kind::Deployment.create(&ns, "web", meta, json!({}), env_from_configmap("cfg")).await;
    let mut reloader = Reloader::start(&ns.name, &["--coalesce-window=0"]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let at = wait_for("the Deployment paused by the reload", RELOAD_WAIT, || async {
        match pause_state(&ns, "web").await {
            (true, Some(at)) => Ok(at),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await.is_some(),
        "template updated in the same patch"
    );
    assert_eq!(Kind::Deployment.revisions(&ns, "web").await, 1, "paused: no rollout yet");
    assert!(at.parse::<jiff::Timestamp>().is_ok(), "paused-at is RFC 3339: {at}");

    // The controller dies while the Deployment is paused; its successor resumes it on time.
    reloader.kill();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(pause_state(&ns, "web").await.0, "nobody resumed it while no controller ran");
    let _successor = Reloader::start(&ns.name, &[]).await;
    wait_for("the Deployment resumed", RELOAD_WAIT, || async {
        match pause_state(&ns, "web").await {
            (false, None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
}

#[tokio::test]
async fn a_pause_ends_while_the_controller_runs() {
    let ns = TestNamespace::create("pause-live").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let meta = json!({"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": "3s"});
    Kind::Deployment.create(&ns, "web", meta, json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("Paused deployment 'web'").await;
    reloader.wait_log("Successfully resumed deployment 'web'").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(pause_state(&ns, "web").await, (false, None));
}

#[tokio::test]
async fn a_malformed_pause_period_is_reported_and_the_reload_still_happens() {
    let ns = TestNamespace::create("pause-bad").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let meta =
        json!({"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": "5 minutes"});
    Kind::Deployment.create(&ns, "web", meta, json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let line = reloader.wait_log("invalid duration").await;
    assert!(line.contains("5 minutes") && line.contains("workload=web"), "{line}");
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(pause_state(&ns, "web").await, (false, None));
}

#[tokio::test]
async fn a_restart_rolls_only_what_changed_while_down_and_only_once() {
    let ns = TestNamespace::create("restart").await;
    create_configmap(&ns, "changed", &[("k", "1")], &[]).await;
    create_configmap(&ns, "same", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "never-reloaded", auto(), json!({}), env_from_configmap("changed")).await;
    Kind::Deployment.create(&ns, "untouched", auto(), json!({}), env_from_configmap("same")).await;
    let mut first = Reloader::start(&ns.name, &[]).await;
    wait_applied_record(&ns, "never-reloaded").await;
    wait_applied_record(&ns, "untouched").await;
    first.kill();

    // Two changes while no controller runs.
    set_configmap_data(&ns, "changed", &[("k", "2")]).await;
    set_configmap_data(&ns, "changed", &[("k", "3")]).await;
    let second = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_revisions(&ns, "never-reloaded", 2).await;
    second.wait_reconciled(2).await;
    Kind::Deployment.stays_at_revisions(&ns, "untouched", 1).await;
    Kind::Deployment.stays_at_revisions(&ns, "never-reloaded", 2).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "never-reloaded", "app", "STAKATER_CHANGED_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "3")]))
    );
    assert_eq!(second.count_log("updated '"), 1);
    drop(second);

    let third = Reloader::start(&ns.name, &[]).await;
    third.wait_reconciled(2).await;
    Kind::Deployment.stays_at_revisions(&ns, "never-reloaded", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "untouched", 1).await;
    assert_eq!(third.count_log("updated '"), 0);
}

#[tokio::test]
async fn a_change_made_while_opted_out_is_not_applied_on_opting_back_in_nor_after_a_restart() {
    let ns = TestNamespace::create("opt-out").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    let mut first = Reloader::start(&ns.name, &[]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;

    // Opted out (the ConfigMap ignored) while it changes: no rollout, then opted back in: still none.
    let updates = first.events("update", "configmaps").await;
    touch_configmap_metadata(&ns, "cfg", &[], &[("reloader.stakater.com/ignore", "true")]).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    updates.wait_grown(2).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    let updates = first.events("update", "configmaps").await;
    touch_configmap_metadata(&ns, "cfg", &[], &[("reloader.stakater.com/ignore", "false")]).await;
    updates.wait_grown(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    first.kill();
    let second = Reloader::start(&ns.name, &[]).await;
    second.wait_reconciled(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    assert_eq!(second.count_log("updated 'web'"), 0);

    // The next real change rolls it once.
    set_configmap_data(&ns, "cfg", &[("k", "4")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 3).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 3).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "4")]))
    );
}

#[tokio::test]
async fn changes_to_several_configs_within_the_window_make_one_rollout() {
    let ns = TestNamespace::create("coalesce").await;
    for cm in ["a", "b", "c"] {
        create_configmap(&ns, cm, &[("k", "1")], &[]).await;
    }
    let spec = json!({"containers": [{"name": "app", "image": "x", "envFrom": [
        {"configMapRef": {"name": "a"}}, {"configMapRef": {"name": "b"}}, {"configMapRef": {"name": "c"}}]}]});
    Kind::Deployment.create(&ns, "web", auto(), json!({}), spec).await;
    // A quiet period as long as the window: the writes below may be far apart on a loaded machine, and this
    // test is about the window (tests/coalescing.rs covers the default quiet period with kubectl and helm). 5 s:
    // three sequential writes take well under a second when idle, and may take seconds on a loaded 2-core CI
    // machine (issue 27: margins that hold there).
    let _reloader = Reloader::start(&ns.name, &["--coalesce-window=5s", "--coalesce-quiet=5s"]).await;
    for cm in ["a", "b", "c"] {
        set_configmap_data(&ns, cm, &[("k", "2")]).await;
    }
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    for env in ["STAKATER_A_CONFIGMAP", "STAKATER_B_CONFIGMAP", "STAKATER_C_CONFIGMAP"] {
        assert_eq!(Kind::Deployment.env(&ns, "web", "app", env).await, Some(configmap_hash(&[("k", "2")])), "{env}");
    }
}

#[tokio::test]
async fn sync_after_restart_reloads_unrecorded_workloads_once() {
    // upstream v1 acts on it only together with --reload-on-create: alone, nothing rolls.
    let alone_ns = TestNamespace::create("sync-restart-alone").await;
    create_configmap(&alone_ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&alone_ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.wait_revisions(&alone_ns, "web", 1).await;
    let alone = Reloader::start(&alone_ns.name, &["--sync-after-restart"]).await;
    alone.wait_reconciled(1).await;
    Kind::Deployment.stays_at_revisions(&alone_ns, "web", 1).await;
    assert_eq!(alone.count_log("updated 'web'"), 0);
    drop(alone);

    let ns = TestNamespace::create("sync-restart").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "web", auto(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.wait_revisions(&ns, "web", 1).await;
    let flags = ["--sync-after-restart", "--reload-on-create=true"];
    let first = Reloader::start(&ns.name, &flags).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(first.count_log("updated 'web'"), 1);
    drop(first);
    let second = Reloader::start(&ns.name, &flags).await;
    second.wait_reconciled(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    assert_eq!(second.count_log("updated 'web'"), 0);
}
