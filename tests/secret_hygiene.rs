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

const K1: &str = "first-hash-key-0123456789";
const K2: &str = "second-hash-key-0123456789";

fn keyed(plain: &str, key: &str) -> String {
    let hash = reloader::rules::hash::ContentHash::parse_hex(plain).expect("hex");
    hash.sealed(key.as_bytes()).to_string()
}

/// The hash the template records for Secret `db`: its `STAKATER_DB_SECRET` env var, or with the annotations
/// strategy the `hash` of `last-reloaded-from`.
async fn stakater_value(ns: &TestNamespace) -> Option<String> {
    if let Some(v) = Kind::Deployment.env(ns, "web", "app", "STAKATER_DB_SECRET").await {
        return Some(v);
    }
    let template = Kind::Deployment.template(ns, "web").await;
    let text = template.metadata?.annotations?.get("reloader.stakater.com/last-reloaded-from")?.clone();
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["hash"].as_str().map(str::to_owned)
}

/// The channels a run's output goes to, as one text: the controller's log (trace level), the namespace's
/// Events, `/metrics`, `explain`, and the Deployment itself (alerts are added by the caller).
async fn all_output(ns: &TestNamespace, reloader: &Reloader, flags: &[&str]) -> String {
    let mut out = reloader.logs().join("\n");
    let events = api::<k8s_openapi::api::core::v1::Event>(ns).list(&Default::default()).await.expect("events");
    out.push_str(&serde_json::to_string(&events.items).expect("json"));
    out.push_str(&http_get(&reloader.http_base().await, "/metrics").await.1);
    let kubeconfig = std::env::var(testenv::harness::KUBECONFIG_ENV).expect("test kubeconfig");
    let explain = std::process::Command::new(env!("CARGO_BIN_EXE_reloader"))
        .args(flags)
        .args(["explain", "deployment/web", "-n", &ns.name])
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run reloader explain");
    assert!(explain.status.success(), "{}", String::from_utf8_lossy(&explain.stderr));
    out.push_str(&String::from_utf8_lossy(&explain.stdout));
    out.push_str(&deployment_text(ns, "web").await);
    out
}

/// Rotates the key the documented way: the old one moves to `previous`.
async fn rotate_key(ns: &TestNamespace, key: &str, previous: &str) {
    let patch = json!({"stringData": {"key": key, "previous": previous}});
    api::<Secret>(ns).patch("hash-key", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("key");
}

#[tokio::test]
async fn keyed_hashes_hide_secret_content_and_switching_rotating_or_unsetting_the_key_rolls_nothing_env_vars() {
    keyed_hashes_hide_secret_content_and_switching_rotating_or_unsetting_the_key_rolls_nothing("env-vars").await;
}

#[tokio::test]
async fn keyed_hashes_hide_secret_content_and_switching_rotating_or_unsetting_the_key_rolls_nothing_annotations() {
    keyed_hashes_hide_secret_content_and_switching_rotating_or_unsetting_the_key_rolls_nothing("annotations").await;
}

async fn keyed_hashes_hide_secret_content_and_switching_rotating_or_unsetting_the_key_rolls_nothing(strategy: &str) {
    let ns = TestNamespace::create(&format!("secret-keyed-{strategy}")).await;
    let strategy_flag = format!("--reload-strategy={strategy}");
    create_secret(&ns, "hash-key", &[("key", K1)], &[]).await;
    create_secret(&ns, "db", &[("password", "123456")], &[]).await;
    let meta = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", meta, json!({}), volume_secret("db")).await;
    let key_flag = format!("--hash-key-secret={}/hash-key", ns.name);
    let keyed_flags = [key_flag.as_str(), "--log-level=trace", strategy_flag.as_str()];
    let plain_flags = [strategy_flag.as_str()];

    // Default mode: upstream's plain SHA-1.
    let mut plain_run = Reloader::start(&ns.name, &plain_flags).await;
    set_secret_value(&ns, "db", "password", "654321").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(stakater_value(&ns).await, Some(secret_hash(&[("password", "654321")])));
    plain_run.kill();

    // Switched on: nothing rolls; the next change rolls once, with a keyed value.
    let receiver = Receiver::start(Answer::Ok).await;
    let alerts = [("ALERT_ON_RELOAD", "true"), ("ALERT_SINK", "webhook"), ("ALERT_WEBHOOK_URL", receiver.url.as_str())];
    let mut on = Reloader::start_with_env(&ns.name, &keyed_flags, &alerts).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    set_secret_value(&ns, "db", "password", "111111").await;
    Kind::Deployment.wait_revisions(&ns, "web", 3).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 3).await;
    let plain = secret_hash(&[("password", "111111")]);
    assert_eq!(stakater_value(&ns).await, Some(keyed(&plain, K1)));
    let mut output = all_output(&ns, &on, &[key_flag.as_str()]).await;
    let alert = receiver.wait_requests(1).await;
    output.extend(alert.iter().map(|a| a.body.as_str()));
    assert!(output.contains("web"), "the alert was read");
    assert!(output.contains("reloader_reload_executed_total"), "the channels were read");
    assert!(output.contains("DEBUG") && output.contains("TRACE"), "the log was at trace level");
    for needle in ["111111", plain.as_str(), K1] {
        assert!(!output.contains(needle), "{needle} found in the run's output");
    }
    on.kill();

    // Rotated: nothing rolls; the next change rolls once under the new key.
    rotate_key(&ns, K2, K1).await;
    let mut rotated = Reloader::start(&ns.name, &keyed_flags).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 3).await;
    set_secret_value(&ns, "db", "password", "222222").await;
    Kind::Deployment.wait_revisions(&ns, "web", 4).await;
    assert_eq!(stakater_value(&ns).await, Some(keyed(&secret_hash(&[("password", "222222")]), K2)));
    rotated.kill();

    // Switched off: nothing rolls; the next change rolls once with upstream's value again.
    let off = Reloader::start(&ns.name, &plain_flags).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 4).await;
    set_secret_value(&ns, "db", "password", "333333").await;
    Kind::Deployment.wait_revisions(&ns, "web", 5).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 5).await;
    assert_eq!(stakater_value(&ns).await, Some(secret_hash(&[("password", "333333")])));
    assert_eq!(off.count_log("updated 'web'"), 1);
}

#[tokio::test]
async fn an_unusable_hash_key_secret_stops_the_controller_with_a_clear_error() {
    let ns = TestNamespace::create("secret-badkey").await;
    create_secret(&ns, "short", &[("key", "tooshort")], &[]).await;
    for (reference, expected) in [
        (format!("{}/short", ns.name), "at least 16 bytes".to_owned()),
        (format!("{}/missing", ns.name), format!("reading the hash key Secret {}/missing", ns.name)),
        ("no-slash".to_owned(), "<namespace>/<name>".to_owned()),
    ] {
        let flag = format!("--hash-key-secret={reference}");
        let mut r = Reloader::spawn(&[&format!("--namespaces={}", ns.name), &flag], &[]);
        assert_eq!(r.wait_exit(std::time::Duration::from_secs(30)).await, Some(1), "{reference}");
        let logs = r.logs().join("\n");
        assert!(logs.contains(&expected), "{reference}: {logs}");
        assert!(!logs.contains("tooshort"), "the key bytes are never printed");
    }
}
