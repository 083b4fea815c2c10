//! Secret hygiene on the real control plane (#18): what the controller writes on workloads never lets a reader of
//! workloads test guesses of a Secret's content offline beyond what upstream itself writes.

mod common;

use common::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Secret};
use kube::{
    ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;

const APPLIED: &str = "reloader.stakater.com/applied-hashes";

async fn deployment_text(ns: &TestNamespace, name: &str) -> String {
    serde_json::to_string(&api::<Deployment>(ns).get(name).await.expect("deployment")).expect("json")
}

async fn record(ns: &TestNamespace, name: &str) -> Option<String> {
    api::<Deployment>(ns).get(name).await.expect("deployment").annotations().get(APPLIED).cloned()
}

#[tokio::test]
async fn the_record_never_carries_a_secrets_plain_sha1_and_older_records_are_resealed_without_a_rollout() {
    let ns = TestNamespace::create("secret-record").await;
    create_secret(&ns, "db", &[("password", "123456")], &[]).await;
    let plain = secret_hash(&[("password", "123456")]);
    let meta = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", meta, json!({}), volume_secret("db")).await;
    let mut first = Reloader::start(&ns.name, &[]).await;
    let sealed = wait_for("the first-sight record", RELOAD_WAIT, || async {
        record(&ns, "web").await.filter(|r| r.contains("secret/db")).ok_or_else(|| "no record yet".to_owned())
    })
    .await;
    assert!(!deployment_text(&ns, "web").await.contains(&plain), "plain SHA-1 of the Secret on the Deployment");
    let uid = api::<Secret>(&ns).get("db").await.expect("secret").uid().expect("uid");
    assert!(!sealed.contains(&uid), "the key is not published with the digest: {sealed}");
    first.kill();

    // A record as an earlier version wrote it (the plain SHA-1): resealed by metadata alone, nothing rolls.
    let older = json!({"metadata": {"annotations": {APPLIED: format!("{{\"secret/db\":\"{plain}\"}}")}}});
    api::<Deployment>(&ns).patch("web", &PatchParams::default(), &Patch::Merge(&older)).await.expect("patch");
    let second = Reloader::start(&ns.name, &[]).await;
    wait_for("the record resealed", RELOAD_WAIT, || async {
        match record(&ns, "web").await {
            Some(r) if r == sealed => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    assert_eq!(second.count_log("updated 'web'"), 0);

    // The next content change rolls it once.
    set_secret_value(&ns, "db", "password", "654321").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    assert!(!record(&ns, "web").await.unwrap_or_default().contains(&secret_hash(&[("password", "654321")])));
}
