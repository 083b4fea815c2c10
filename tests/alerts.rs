//! Alerts and webhook mode against local HTTP receivers: upstream's payloads per sink (plus the names of the keys
//! that changed), a hanging and a failing receiver never delay or block reloads, and the URL never reaches the
//! logs.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

const TOKEN_PATH: &str = "/hooks/T0KEN-never-logged";

async fn setup(prefix: &str) -> TestNamespace {
    let ns = TestNamespace::create(prefix).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    ns
}

/// Upstream's message, and ours after it: the key the test changes.
fn message(ns: &TestNamespace) -> String {
    format!(
        "Reloader detected changes in *cfg* of type *CONFIGMAP* in namespace *{0}*. Hence reloaded *web* of type *Deployment* in namespace *{0}* (changed keys: k)",
        ns.name
    )
}

async fn alert_once(prefix: &str, sink: &str, extra_env: &[(&str, &str)]) -> (TestNamespace, Received, Reloader) {
    let ns = setup(prefix).await;
    let receiver = Receiver::start(Answer::Ok).await;
    let url = format!("{}{TOKEN_PATH}", receiver.url);
    let mut env = vec![("ALERT_ON_RELOAD", "true"), ("ALERT_SINK", sink), ("ALERT_WEBHOOK_URL", url.as_str())];
    env.extend_from_slice(extra_env);
    let reloader = Reloader::start_with_env(&ns.name, &[], &env).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let got = receiver.wait_requests(1).await;
    assert_eq!(got.len(), 1, "one alert per reload");
    assert_eq!(got[0].path, TOKEN_PATH);
    assert!(reloader.logs().iter().all(|l| !l.contains("T0KEN")), "the URL must never be logged");
    (ns, got[0].clone(), reloader)
}

#[tokio::test]
async fn slack_gets_upstreams_attachment() {
    let (ns, got, _r) = alert_once("alert-slack", "slack", &[]).await;
    assert_eq!(got.content_type, "application/json");
    let expected = json!({"attachments": [{"color": "good", "author_name": "Reloader", "text": message(&ns)}]});
    assert_eq!(serde_json::from_str::<serde_json::Value>(&got.body).expect("json"), expected);
    assert!(
        got.body.starts_with(r#"{"attachments":[{"color":"good","author_name":"Reloader","text":"#),
        "{}",
        got.body
    );
}

#[tokio::test]
async fn teams_and_gchat_get_upstreams_text_payload() {
    for (prefix, sink) in [("alert-teams", "teams"), ("alert-gchat", "GChat")] {
        let (ns, got, _r) = alert_once(prefix, sink, &[]).await;
        assert_eq!(got.content_type, "application/json");
        assert_eq!(got.body, json!({"text": message(&ns)}).to_string());
    }
}

#[tokio::test]
async fn a_raw_webhook_gets_plain_text_with_additional_info() {
    let (ns, got, _r) = alert_once("alert-raw", "webhook", &[("ALERT_ADDITIONAL_INFO", "prod-eu")]).await;
    assert!(got.content_type.starts_with("text/plain"), "{}", got.content_type);
    assert_eq!(got.body, format!("prod-eu : {}", message(&ns).replace('*', "")));
}

#[tokio::test]
async fn hanging_and_failing_receivers_never_delay_reloads() {
    for answer in [Answer::Hang, Answer::Fail] {
        let ns = setup(&format!("alert-{answer:?}")).await;
        let receiver = Receiver::start(answer).await;
        let env = [("ALERT_ON_RELOAD", "true"), ("ALERT_SINK", "slack"), ("ALERT_WEBHOOK_URL", receiver.url.as_str())];
        let reloader = Reloader::start_with_env(&ns.name, &["--coalesce-window=0"], &env).await;
        let base = reloader.http_base().await;
        for (i, v) in ["2", "3", "4"].iter().enumerate() {
            set_configmap_data(&ns, "cfg", &[("k", v)]).await;
            Kind::Deployment.wait_revisions(&ns, "web", i + 2).await;
        }
        if answer == Answer::Fail {
            // Each alert is tried 3 times, then counted as failed.
            receiver.wait_requests(9).await;
            wait_for("3 failed alerts counted", Duration::from_secs(30), || async {
                let (_, m) = http_get(&base, "/metrics").await;
                let failed = sample(&m, "reloader_alerts_total{result=\"failed\"}").unwrap_or(0.0);
                if failed == 3.0 { Ok(()) } else { Err(format!("failed={failed}")) }
            })
            .await;
        } else {
            assert!(!receiver.requests().is_empty(), "the hanging receiver was called");
        }
    }
}

#[tokio::test]
async fn webhook_mode_posts_instead_of_reloading() {
    let ns = setup("webhook-mode").await;
    let receiver = Receiver::start(Answer::Ok).await;
    let url = format!("--webhook-url={}{TOKEN_PATH}", receiver.url);
    let reloader = Reloader::start(&ns.name, &[&url]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let got = receiver.wait_requests(1).await;
    let body: serde_json::Value = serde_json::from_str(&got[0].body).expect("JSON");
    assert_eq!(
        body,
        json!({"webhook": "update successful", "resourceKind": "ConfigMap", "resourceName": "cfg",
               "resourceNamespace": ns.name, "changedKeys": ["k"], "removedKeys": 0})
    );
    assert_eq!(got[0].content_type, "application/json");
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    assert!(reloader.logs().iter().all(|l| !l.contains("T0KEN")));
}
