//! Issue 27, finding 2, on the real control plane: the API server applies a reload's PATCH and its answer is lost
//! (a proxy between the controller and the API server answers 504 instead). The work queue retries the same
//! write — the same `STAKATER_*` value, or the same `last-reloaded-from` with the time of the change fixed when it
//! was queued, or the same `restartedAt` of the restart strategy — so the Deployment rolls out once, in every
//! strategy. With `--max-concurrent-rollouts=1`, the
//! retry (it changes no template) must not hold the only slot: another Deployment's change rolls at once.

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
    wait_for("the answer to web's reload lost, and the write retried", RELOAD_WAIT, || async {
        let retried = reloader.logs().iter().any(|l| l.contains("reload failed, retrying") && l.contains("web"));
        if proxy.lost() == 1 && retried { Ok(()) } else { Err(format!("lost {}, retried {retried}", proxy.lost())) }
    })
    .await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    if strategy == "env-vars" {
        let value = Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await;
        assert_eq!(value, Some(configmap_hash(&[("k", "2")])));
    }
    // Another change now rolls at once: the retry that changed nothing does not hold the budget's only slot.
    set_configmap_data(&ns, "other-cfg", &[("k", "2")]).await;
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
