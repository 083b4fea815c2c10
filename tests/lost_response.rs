//! Issue 27, finding 2, on the real control plane: the API server applies a reload's PATCH and its answer is lost
//! (a proxy between the controller and the API server answers 504 instead). The controller reads the workload
//! back and, finding what it wrote, reports the reload it was (issue 38: no `ReloadFail`, no failure counted);
//! were it retried, the retry writes the same `STAKATER_*` value, or the same `last-reloaded-from` with the time of
//! the change fixed when it was queued, or the same `restartedAt` of the restart strategy — so the Deployment
//! rolls out once, in every strategy. With `--max-concurrent-rollouts=1` the rollout the lost write started holds
//! the only slot until it completes, and no longer.

mod common;

use common::{proxy::LosingProxy, *};
use serde_json::json;

/// `strategy` names the case; `flag` chooses it.
async fn lost_answer_rolls_once(strategy: &str, flag: &str) {
    let ns = TestNamespace::create(&format!("lost-{strategy}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_configmap(&ns, "other-cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "other", auto, json!({}), env_from_configmap("other-cfg")).await;
    Kind::Deployment.wait_revisions(&ns, "web", 1).await;
    Kind::Deployment.wait_revisions(&ns, "other", 1).await;

    let proxy = LosingProxy::start(&ns.name, "/deployments/web").await;
    let kubeconfig = proxy.kubeconfig().display().to_string();
    let scope = format!("--namespaces={}", ns.name);
    let args = [scope.as_str(), flag, "--max-concurrent-rollouts=1", "--rollout-timeout=10m"];
    let reloader = Reloader::start_unscoped(&args, &[("KUBECONFIG", kubeconfig.as_str())]).await;
    // The first-sight record is written (and answered) before the loss is armed.
    wait_for("web's first-sight record", RELOAD_WAIT, || async {
        let d = ns.api::<k8s_openapi::api::apps::v1::Deployment>().get("web").await.map_err(|e| e.to_string())?;
        let recorded = d.metadata.annotations.is_some_and(|a| a.contains_key("reloader.stakater.com/applied-hashes"));
        if recorded { Ok(()) } else { Err("no record yet".into()) }
    })
    .await;
    proxy.arm(1);

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("the answer to web's reload lost, and the write read back", RELOAD_WAIT, || async {
        let read_back = reloader.logs().iter().any(|l| l.contains(READ_BACK) && l.contains("web"));
        if proxy.lost() == 1 && read_back {
            Ok(())
        } else {
            Err(format!("lost {}, read back {read_back}", proxy.lost()))
        }
    })
    .await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    reported_as_written(&ns, &reloader, "web").await;
    if strategy == "env-vars" {
        let value = Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await;
        assert_eq!(value, Some(configmap_hash(&[("k", "2")])));
    }
    // Another change now rolls at once: the retry that changed nothing does not hold the budget's only slot.
    set_configmap_data(&ns, "other-cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "other", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
}

/// The controller's line for a write whose answer was lost and which the workload shows applied.
const READ_BACK: &str = "read back, the workload carries it";

/// `name`'s reload was reported as written: a `Reloaded` Event, no `ReloadFail`, and no failed reload counted.
async fn reported_as_written(ns: &TestNamespace, reloader: &Reloader, name: &str) {
    let events = ns.api::<k8s_openapi::api::events::v1::Event>();
    let about = |e: &k8s_openapi::api::events::v1::Event, reason: &str| {
        e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
    };
    wait_for(&format!("a Reloaded Event for {name}"), RELOAD_WAIT, || async {
        let list = events.list(&Default::default()).await.map_err(|e| e.to_string())?;
        if list.items.iter().any(|e| about(e, "Reloaded")) { Ok(()) } else { Err("none yet".into()) }
    })
    .await;
    let list = events.list(&Default::default()).await.expect("events");
    let failed: Vec<_> = list.items.iter().filter(|e| about(e, "ReloadFail")).collect();
    assert!(failed.is_empty(), "a write that landed was reported as failed: {failed:?}");
    let metrics = reloader.metrics().await;
    let failures = sample(&metrics, "reloader_reload_executed_total{success=\"false\"}").unwrap_or(0.0);
    assert_eq!(failures, 0.0, "a write that landed was counted as a failed reload");
    assert_eq!(sample(&metrics, "reloader_errors_total{type=\"answer_lost\"}"), Some(1.0));
}

/// Issue 38: the answer lost, the first attempt's rollout is the one in flight. Its pods are held not Ready, so it
/// stays in progress: another workload's change waits for the budget's only slot (the old code freed it as a
/// failed write, and the retry found nothing to write, so the slot was never taken again) and rolls once the
/// rollout completes.
#[tokio::test]
async fn a_lost_answer_keeps_the_slot_of_the_rollout_it_started() {
    use k8s_openapi::api::apps::v1::Deployment;
    let ns = TestNamespace::create("lost-slot").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_configmap(&ns, "other-cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    create_held_deployment(&ns, "web", auto.clone(), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "other", auto, json!({}), env_from_configmap("other-cfg")).await;
    // Both rollouts complete before the controller starts: none is adopted into the budget.
    for name in ["web", "other"] {
        wait_for(&format!("{name}'s first rollout complete"), RELOAD_WAIT, || async {
            let d = ns.api::<Deployment>().get(name).await.map_err(|e| e.to_string())?;
            let status = d.status.unwrap_or_default();
            let done = status.observed_generation == d.metadata.generation && status.available_replicas == Some(1);
            if done { Ok(()) } else { Err(format!("{status:?}")) }
        })
        .await;
    }

    let proxy = LosingProxy::start(&ns.name, "/deployments/web").await;
    let kubeconfig = proxy.kubeconfig().display().to_string();
    let scope = format!("--namespaces={}", ns.name);
    let args = [scope.as_str(), "--max-concurrent-rollouts=1", "--rollout-timeout=10m"];
    let reloader = Reloader::start_unscoped(&args, &[("KUBECONFIG", kubeconfig.as_str())]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;
    Kind::Deployment.wait_recorded(&ns, "other").await;
    proxy.arm(1);

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log(READ_BACK).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    reported_as_written(&ns, &reloader, "web").await;

    let waited = reloader.counter("reloader_skipped_total{reason=\"rollout_budget\"}").await;
    set_configmap_data(&ns, "other-cfg", &[("k", "2")]).await;
    waited.wait_grown(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "other", 1).await;

    // web's new pod becomes Ready: its rollout completes, the slot frees, other rolls.
    release_held_pods(&ns, "web").await;
    Kind::Deployment.wait_revisions(&ns, "other", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
}

#[tokio::test]
async fn a_reload_whose_answer_is_lost_rolls_once_with_env_vars() {
    lost_answer_rolls_once("env-vars", "--reload-strategy=env-vars").await;
}

#[tokio::test]
async fn a_reload_whose_answer_is_lost_rolls_once_with_annotations() {
    lost_answer_rolls_once("annotations", "--reload-strategy=annotations").await;
}

#[tokio::test]
async fn a_reload_whose_answer_is_lost_rolls_once_with_the_restart_strategy() {
    lost_answer_rolls_once("restart", "--rollout-strategy=restart").await;
}

/// Issue 38, finding 6: the restart strategy's write lands, its answer is lost and the workload cannot be read
/// back, so the write is retried with the first change's trigger — and meets, waiting in the queue, a newer change
/// of the ConfigMap. The two join with the earliest trigger; its `restartedAt` written again with the newer
/// content would change no template (nothing restarts) while the record said the newer content was applied. The
/// retry must take a later mark: a third revision, on the newest content. One worker, held by `blocker`'s write
/// (its answer held by the proxy), keeps the newer change waiting until the retry has joined it; no quiet period,
/// so each change is queued when it is seen. With the mark not refreshed this test fails: web stays at 2 revisions.
/// `hold_watch`: the proxy also holds the controller's watch of Deployments from before the first write until the
/// retry was sent, so the retry plans from the state before the first write (no echo of it), as when the watch
/// lags.
async fn retry_joins_newer_content(case: &str, hold_watch: bool) {
    const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
    let ns = TestNamespace::create(case).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_configmap(&ns, "blocker-cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "blocker", auto, json!({}), env_from_configmap("blocker-cfg")).await;
    Kind::Deployment.wait_revisions(&ns, "web", 1).await;

    let proxy = LosingProxy::start(&ns.name, "/deployments/web").await;
    let kubeconfig = proxy.kubeconfig().display().to_string();
    let scope = format!("--namespaces={}", ns.name);
    let args = [scope.as_str(), "--rollout-strategy=restart", "--workers=1", "--coalesce-window=0s"];
    let reloader = Reloader::start_unscoped(&args, &[("KUBECONFIG", kubeconfig.as_str())]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;
    Kind::Deployment.wait_recorded(&ns, "blocker").await;
    let patches_before = proxy.patches();
    let deployment_updates = reloader.events("update", "deployments").await;
    if hold_watch {
        proxy.hold_watches("/deployments");
    }
    proxy.hold_answers();
    proxy.fail_reads(1);
    proxy.arm(1);

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("web's restart written, its answer held", RELOAD_WAIT, || async {
        if proxy.lost() == 1 { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let marks = || async {
        let template = Kind::Deployment.template(&ns, "web").await;
        template.metadata.and_then(|m| m.annotations).unwrap_or_default().get(RESTARTED_AT).cloned()
    };
    let first_mark = marks().await.expect("the first write's restartedAt");
    // While the only worker waits for that answer: blocker's change is queued, then web's newer content (web is in
    // flight: it is queued again behind blocker when its attempt ends).
    proxy.hold_next("/deployments/blocker");
    let updates = reloader.events("update", "configmaps").await;
    set_configmap_data(&ns, "blocker-cfg", &[("k", "2")]).await;
    updates.wait_grown(1).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    updates.wait_grown(2).await;
    let retries = reloader.counter("reloader_retries_total").await;
    proxy.release();
    // web's 504, its read-back refused: a retry 100 ms later, with the first change's trigger. The worker took
    // blocker meanwhile, whose answer is held: web's newer change stays queued, and the retry joins it.
    retries.wait_grown(1).await;
    wait_for("blocker's write sent, its answer held", RELOAD_WAIT, || async {
        if proxy.held() == 2 { Ok(()) } else { Err(format!("{} held", proxy.held())) }
    })
    .await;
    // The retry's timer (100 ms, nothing observable) fires while blocker's answer is held; a margin for a loaded
    // machine. Were it later, the retry would find nothing left to write and this test could not fail: it never
    // fails for being early.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    proxy.release();
    if hold_watch {
        wait_for("web's retry sent", RELOAD_WAIT, || async {
            let sent = proxy.patches() - patches_before;
            if sent == 2 { Ok(()) } else { Err(format!("{sent} PATCHes of web since the loss was armed")) }
        })
        .await;
        assert_eq!(deployment_updates.grown().await, 0.0, "the controller saw a Deployment change while held");
        proxy.release_watches();
    }

    Kind::Deployment.stays_at_revisions(&ns, "web", 3).await;
    assert_ne!(marks().await, Some(first_mark), "the retry wrote the first change's mark again");
    let d = ns.api::<k8s_openapi::api::apps::v1::Deployment>().get("web").await.expect("web");
    let record = d.metadata.annotations.unwrap_or_default();
    let record = record.get("reloader.stakater.com/applied-hashes").cloned().unwrap_or_default();
    assert!(record.contains(&configmap_hash(&[("k", "3")])), "record {record}");
    Kind::Deployment.wait_revisions(&ns, "blocker", 2).await;
}

#[tokio::test]
async fn a_retry_that_joins_newer_content_restarts_again_with_the_restart_strategy() {
    retry_joins_newer_content("lost-newer", false).await;
}

#[tokio::test]
async fn a_retry_that_plans_before_the_echo_restarts_again_with_the_restart_strategy() {
    retry_joins_newer_content("lost-newer-held", true).await;
}
