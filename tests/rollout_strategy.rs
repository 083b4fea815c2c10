//! The restart strategy on the real control plane (issue 29): `reloader.stakater.com/rollout-strategy: restart`
//! (or `--rollout-strategy=restart`) rolls a Deployment, StatefulSet or DaemonSet with `kubectl rollout
//! restart`'s `kubectl.kubernetes.io/restartedAt` instead of a `STAKATER_*` env var; the hashes live in the
//! `applied-hashes` record, so a controller restart rolls nothing again, and each later change rolls once more,
//! even two changes within a second.

mod common;

use common::*;
use serde_json::json;

const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
const ENV: &str = "STAKATER_CFG_CONFIGMAP";

async fn restarted_at(kind: Kind, ns: &TestNamespace, name: &str) -> Option<String> {
    kind.template(ns, name).await.metadata?.annotations?.get(RESTARTED_AT).cloned()
}

async fn restart_strategy_rolls_with_restarted_at_and_never_twice(kind: Kind) {
    let ns = TestNamespace::create(&format!("restart-{kind:?}")).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let restart = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"});
    kind.create(&ns, "web", restart, json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    kind.wait_revisions(&ns, "web", 1).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    kind.wait_revisions(&ns, "web", 2).await;
    let first = restarted_at(kind, &ns, "web").await.expect("restartedAt on the pod template");
    assert!(first.parse::<jiff::Timestamp>().is_ok() && first.ends_with('Z'), "RFC 3339 in UTC: {first}");
    assert_eq!(kind.env(&ns, "web", "app", ENV).await, None, "no STAKATER_* env var");
    let line = reloader.wait_log("updated 'web' of type").await;
    assert!(line.contains("rollout_strategy=restart"), "{line}");

    // The record is the memory: a new controller, once it has reconciled the workload and found nothing to do,
    // has rolled nothing.
    drop(reloader);
    let reloader = Reloader::start(&ns.name, &[]).await;
    let base = reloader.http_base().await;
    wait_for("the new controller's reconcile of web", RELOAD_WAIT, || async {
        let metrics = http_get(&base, "/metrics").await.1;
        let up_to_date = sample(&metrics, "reloader_skipped_total{reason=\"strategy_not_updated\"}").unwrap_or(0.0);
        if up_to_date >= 1.0 { Ok(()) } else { Err(format!("{up_to_date} reconciles with nothing to do")) }
    })
    .await;
    kind.stays_at_revisions(&ns, "web", 2).await;

    // Two changes within a second roll twice: the mark has milliseconds.
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    kind.wait_revisions(&ns, "web", 3).await;
    set_configmap_data(&ns, "cfg", &[("k", "4")]).await;
    kind.wait_revisions(&ns, "web", 4).await;
    let last = restarted_at(kind, &ns, "web").await.expect("restartedAt");
    assert!(last > first, "{last} after {first}");
    drop(reloader);
}

per_kind!(restart_strategy_rolls_with_restarted_at_and_never_twice);

/// `--rollout-strategy=restart` applies to every workload; `rollout-strategy: rollout` opts one out.
#[tokio::test]
async fn the_flag_restarts_every_workload_but_those_that_opt_out() {
    let ns = TestNamespace::create("restart-flag").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let opted_out = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "rollout"});
    Kind::Deployment.create(&ns, "restarted", auto, json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "rolled", opted_out, json!({}), env_from_configmap("cfg")).await;
    let _reloader = Reloader::start(&ns.name, &["--rollout-strategy=restart"]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "restarted", 2).await;
    Kind::Deployment.wait_revisions(&ns, "rolled", 2).await;
    assert!(restarted_at(Kind::Deployment, &ns, "restarted").await.is_some());
    assert_eq!(Kind::Deployment.env(&ns, "restarted", "app", ENV).await, None);
    assert_eq!(restarted_at(Kind::Deployment, &ns, "rolled").await, None);
    let hash = configmap_hash(&[("k", "2")]);
    assert_eq!(Kind::Deployment.env(&ns, "rolled", "app", ENV).await.as_deref(), Some(hash.as_str()));
}
