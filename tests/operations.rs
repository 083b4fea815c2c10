//! Operations on the real control plane: metrics scraped from a running controller move by exactly the
//! expected amounts, health endpoints follow startup, SIGTERM exits cleanly, the meta-info ConfigMap is published.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

async fn scrape(base: &str) -> String {
    let (status, body) = http_get(base, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Sum of `rest_client_requests_total` for one HTTP method.
fn requests(metrics: &str, method: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && l.contains(&format!("method=\"{method}\"")))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
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
    // Watches open their streams right after their first list; wait until no request is still starting.
    let mut before = scrape(&base).await;
    loop {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now = scrape(&base).await;
        if requests(&now, "GET") == requests(&before, "GET") {
            break;
        }
        before = now;
    }

    // Two content changes, each reloading two Deployments; then one annotation-only change.
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "a", 2).await;
    Kind::Deployment.wait_revisions(&ns, "b", 2).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&ns, "a", 3).await;
    Kind::Deployment.wait_revisions(&ns, "b", 3).await;
    touch_configmap_metadata(&ns, "cfg", &[], &[("note", "x")]).await;
    // Wait until all three ConfigMap events (two content changes, one annotation-only change) were received.
    let configmap_events = |m: &str| {
        ["add", "update"]
            .iter()
            .map(|t| {
                value(m, &format!("reloader_events_received_total{{event_type=\"{t}\",resource_type=\"configmaps\"}}"))
            })
            .sum::<f64>()
    };
    // The namespace's kube-root-ca.crt ConfigMap may also arrive late (KCM publishes it): the annotation-only
    // change is the one counted as skipped.
    let skipped = |m: &str| value(m, "reloader_skipped_total{reason=\"no_data_change\"}");
    let after = wait_for("the ConfigMap events to be received", RELOAD_WAIT, || async {
        let m = scrape(&base).await;
        let d = configmap_events(&m) - configmap_events(&before);
        let s = skipped(&m) - skipped(&before);
        if d >= 3.0 && s >= 1.0 { Ok(m) } else { Err(format!("{d} events, {s} skipped; metrics:\n{m}")) }
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
    // The annotation-only change (skipped, awaited above) needed no action: still exactly 4 reloads.
    assert_eq!(value(&after, "reloader_workqueue_depth"), 0.0);
    assert_eq!(value(&after, "reloader_index_objects{type=\"workloads\"}"), 2.0);
    assert_eq!(value(&after, "reloader_ready"), 1.0);
    assert!(value(&after, "process_resident_memory_bytes") > 0.0);
    // No GET or LIST per event: the index answers; watches were opened before `before`.
    assert_eq!(requests(&after, "GET") - requests(&before, "GET"), 0.0, "GET/LIST requests during the changes");
    assert!(requests(&after, "PATCH") - requests(&before, "PATCH") >= 4.0);
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
    // Killed even when an assertion below fails.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = KillOnDrop(child);
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
    drop(child);

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

async fn events_for(ns: &TestNamespace, workload: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
    let list = ns.api::<k8s_openapi::api::events::v1::Event>().list(&Default::default()).await.expect("list events");
    list.items.into_iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(workload)).collect()
}

#[tokio::test]
async fn reloads_and_bad_annotations_become_kubernetes_events() {
    let ns = TestNamespace::create("events").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_secret(&ns, "creds", &[("password", "hunter2")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "creds"}}]}]});
    Kind::Deployment.create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), spec).await;
    Kind::Deployment
        .create(&ns, "bad", json!({"secret.reloader.stakater.com/reload": "creds,(oops"}), json!({}), plain_pod())
        .await;
    let _reloader = Reloader::start(&ns.name, &[]).await;
    set_secret_value(&ns, "creds", "password", "correct-horse").await;

    let reloaded = wait_for("a Reloaded event on web", RELOAD_WAIT, || async {
        let events = events_for(&ns, "web").await;
        events.into_iter().find(|e| e.reason.as_deref() == Some("Reloaded")).ok_or_else(|| "none yet".to_owned())
    })
    .await;
    assert_eq!(reloaded.type_.as_deref(), Some("Normal"));
    let note = reloaded.note.unwrap_or_default();
    assert_eq!(
        note,
        format!(
            "Changes detected in 'creds' of type 'SECRET' in namespace '{0}', Updated 'web' of type 'Deployment' in namespace '{0}' (changed keys: password)",
            ns.name
        ),
        "upstream's note, then the changed keys' names (never values)"
    );
    let regarding = reloaded.regarding.expect("regarding");
    assert_eq!((regarding.kind.as_deref(), regarding.api_version.as_deref()), (Some("Deployment"), Some("apps/v1")));

    // The same change again is the same Event counted twice (a series, as client-go's recorders count repeats);
    // a reload for another resource is an Event of its own with its own note (kube-runtime's Recorder counted it
    // on the first Event, under the Secret's note).
    set_secret_value(&ns, "creds", "password", "battery-staple").await;
    Kind::Deployment.wait_revisions(&ns, "web", 3).await;
    let counted = wait_for("the Reloaded event on web counted twice", RELOAD_WAIT, || async {
        let reloaded: Vec<_> =
            events_for(&ns, "web").await.into_iter().filter(|e| e.reason.as_deref() == Some("Reloaded")).collect();
        match reloaded.as_slice() {
            [one] if one.series.as_ref().is_some_and(|s| s.count == 2) => Ok(one.clone()),
            other => Err(format!("{} Reloaded events, series {:?}", other.len(), other.first().map(|e| &e.series))),
        }
    })
    .await;
    assert_eq!(counted.note.as_deref(), Some(note.as_str()));
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("a Reloaded event on web naming cfg", RELOAD_WAIT, || async {
        let events = events_for(&ns, "web").await;
        let notes: Vec<String> = events.into_iter().filter_map(|e| e.note).collect();
        if notes.iter().any(|n| n.contains("Changes detected in 'cfg' of type 'CONFIGMAP'")) {
            Ok(())
        } else {
            Err(format!("notes: {notes:?}"))
        }
    })
    .await;

    let invalid = wait_for("an InvalidAnnotation event on bad", RELOAD_WAIT, || async {
        let events = events_for(&ns, "bad").await;
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidAnnotation"))
            .ok_or_else(|| "none yet".to_owned())
    })
    .await;
    assert_eq!(invalid.type_.as_deref(), Some("Warning"));
    let note = invalid.note.unwrap_or_default();
    assert!(note.contains("(oops") && note.contains("secret.reloader.stakater.com/reload"), "{note}");

    // No event anywhere in the namespace carries Secret data.
    let all = ns.api::<k8s_openapi::api::events::v1::Event>().list(&Default::default()).await.expect("events");
    for e in all.items {
        let note = e.note.unwrap_or_default();
        assert!(!note.contains("hunter2") && !note.contains("correct-horse"), "{note}");
    }
}

#[tokio::test]
async fn the_meta_info_configmap_describes_the_running_controller() {
    let ns = TestNamespace::create("metainfo").await;
    let env = [("RELOADER_NAMESPACE", ns.name.as_str()), ("RELOADER_DEPLOYMENT_NAME", "reloader")];
    let _reloader = Reloader::start_with_env(&ns.name, &["--reload-on-create=true"], &env).await;
    let cm = wait_for("the meta-info ConfigMap", RELOAD_WAIT, || async {
        api::<k8s_openapi::api::core::v1::ConfigMap>(&ns)
            .get_opt("reloader-meta-info")
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    let labels = cm.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("reloader.stakater.com/meta-info").map(String::as_str), Some("reloader"));
    let data = cm.data.unwrap_or_default();
    let doc = |key: &str| serde_json::from_str::<serde_json::Value>(&data[key]).expect("JSON document");
    assert_eq!(doc("deploymentInfo"), json!({"name": "reloader", "namespace": ns.name, "creationTimestamp": null}));
    let options = doc("reloaderOptions");
    assert_eq!(options["reloadOnCreate"], json!(true));
    assert_eq!(options["reloadStrategy"], "env-vars");
    assert_eq!(options["reloaderAutoAnnotation"], "reloader.stakater.com/auto");
    let (commit, time) = built_commit();
    assert_eq!(
        doc("buildInfo"),
        json!({"goVersion": "", "releaseVersion": env!("CARGO_PKG_VERSION"), "commitHash": commit,
               "commitTime": time, "edition": "oss"})
    );
}
