//! Operations on the real control plane: metrics scraped from a running controller move by exactly the
//! expected amounts, health endpoints follow startup, SIGTERM exits cleanly.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

async fn scrape(base: &str) -> String {
    let (status, body) = http_get(base, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    body
}

fn value(metrics: &str, series: &str) -> f64 {
    sample(metrics, series).unwrap_or(0.0)
}

#[tokio::test]
async fn counters_move_by_exactly_the_reloads_performed() {
    let ns = TestNamespace::create("metrics").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    for name in ["a", "b"] {
        Kind::Deployment
            .create(&ns, name, json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
            .await;
    }
    let reloader =
        Reloader::start_with_env(&ns.name, &["--coalesce-window=0"], &[("METRICS_COUNT_BY_NAMESPACE", "enabled")])
            .await;
    let base = reloader.http_base().await;
    Kind::Deployment.wait_revisions(&ns, "a", 1).await;
    let before = scrape(&base).await;

    // Two content changes, each reloading two Deployments; then one annotation-only change.
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "a", 2).await;
    Kind::Deployment.wait_revisions(&ns, "b", 2).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&ns, "a", 3).await;
    Kind::Deployment.wait_revisions(&ns, "b", 3).await;
    touch_configmap_metadata(&ns, "cfg", &[], &[("note", "x")]).await;
    let after = wait_for("the metadata-only change to be counted", RELOAD_WAIT, || async {
        let m = scrape(&base).await;
        let d = value(&m, "reloader_skipped_total{reason=\"no_data_change\"}")
            - value(&before, "reloader_skipped_total{reason=\"no_data_change\"}");
        if d >= 1.0 { Ok(m) } else { Err(format!("no_data_change delta {d}")) }
    })
    .await;
    let delta = |series: &str| value(&after, series) - value(&before, series);
    assert_eq!(delta("reloader_reload_executed_total{success=\"true\"}"), 4.0);
    assert_eq!(delta("reloader_reload_executed_total{success=\"false\"}"), 0.0);
    assert_eq!(
        delta(&format!("reloader_reload_executed_total_by_namespace{{namespace=\"{}\",success=\"true\"}}", ns.name)),
        4.0
    );
    assert_eq!(delta("reloader_action_total{result=\"success\",workload_kind=\"Deployment\"}"), 4.0);
    assert_eq!(delta("reloader_workloads_matched_total{kind=\"Deployment\"}"), 4.0);
    assert_eq!(delta("reloader_action_latency_seconds_count{workload_kind=\"Deployment\"}"), 4.0);
    assert_eq!(delta("reloader_skipped_total{reason=\"no_data_change\"}"), 1.0);
    assert_eq!(delta("reloader_events_received_total{event_type=\"update\",resource_type=\"configmaps\"}"), 3.0);
    assert_eq!(value(&after, "reloader_workqueue_depth"), 0.0);
    assert_eq!(value(&after, "reloader_index_objects{type=\"workloads\"}"), 2.0);
    assert_eq!(value(&after, "reloader_ready"), 1.0);
    assert!(value(&after, "process_resident_memory_bytes") > 0.0);
}

#[tokio::test]
async fn health_endpoints_follow_startup_and_readiness_needs_synced_watches() {
    // A controller whose API server is unreachable: alive, never ready.
    let dir = std::env::temp_dir().join(format!("reloader-unreachable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, r#"{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:1","insecure-skip-tls-verify":true}}],"users":[{"name":"u","user":{"token":"t"}}],"contexts":[{"name":"c","context":{"cluster":"c","user":"u"}}],"current-context":"c"}"#)
        .expect("write kubeconfig");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_reloader"))
        .args(["--metrics-addr=127.0.0.1:0", "--namespaces=x"])
        .env("KUBECONFIG", &kubeconfig)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout).lines().map_while(Result::ok).find(|l| l.contains("serving /metrics"))
    })
    .await
    .expect("join")
    .expect("startup line");
    let base = format!(
        "http://{}",
        line.rsplit(" on ").next().unwrap_or_default().split_whitespace().next().unwrap_or_default()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(http_get(&base, "/live").await, (200, "alive".to_owned()));
    assert_eq!(http_get(&base, "/healthz").await.0, 200);
    let (status, body) = http_get(&base, "/readyz").await;
    assert_eq!((status, body.as_str()), (503, "watches have not synced yet"));
    let _ = child.kill();
    let _ = child.wait();

    // Against the real cluster it becomes ready once synced.
    let ns = TestNamespace::create("health").await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let base = reloader.http_base().await;
    wait_for("/readyz to answer 200", RELOAD_WAIT, || async {
        match http_get(&base, "/readyz").await {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn sigterm_finishes_and_exits_zero_within_the_bound() {
    let ns = TestNamespace::create("sigterm").await;
    let mut reloader = Reloader::start(&ns.name, &[]).await;
    let status =
        std::process::Command::new("kill").args(["-TERM", &reloader.pid().to_string()]).status().expect("kill");
    assert!(status.success());
    assert_eq!(reloader.wait_exit(Duration::from_secs(15)).await, Some(0));
    assert!(reloader.count_log("shutting down") >= 1);
}
