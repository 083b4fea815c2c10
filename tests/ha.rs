//! High availability on the real control plane: three replicas compete for the Lease; the leader is killed
//! in the middle of a burst of changes; every change still reloads its workload exactly once.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;

const LEASE: &str = "stakater-reloader-lock";

async fn holder(ns: &TestNamespace) -> Option<String> {
    let lease = ns.api::<Lease>().get_opt(LEASE).await.ok().flatten()?;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

async fn start_replica(ns: &TestNamespace, name: &str) -> Reloader {
    start_replica_with(ns, name, &FAST_LEASES).await
}

/// Short leases, so that a failover is quick.
const FAST_LEASES: [&str; 3] =
    ["--leader-election-lease-duration=3s", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=1s"];

async fn start_replica_with(ns: &TestNamespace, name: &str, extra: &[&str]) -> Reloader {
    let mut args = vec!["--enable-ha", "--coalesce-window=0"];
    args.extend_from_slice(extra);
    Reloader::start_with_env(&ns.name, &args, &[("POD_NAME", name), ("POD_NAMESPACE", &ns.name)]).await
}

#[tokio::test]
async fn killing_the_leader_mid_burst_loses_and_duplicates_nothing() {
    let ns = TestNamespace::create("ha").await;
    const N: usize = 10;
    for i in 0..N {
        create_configmap(&ns, &format!("cfg-{i}"), &[("k", "0")], &[]).await;
        Kind::Deployment
            .create(
                &ns,
                &format!("web-{i}"),
                json!({"reloader.stakater.com/auto": "true"}),
                json!({}),
                env_from_configmap(&format!("cfg-{i}")),
            )
            .await;
    }
    let mut replicas = [start_replica(&ns, "r0").await, start_replica(&ns, "r1").await, start_replica(&ns, "r2").await];
    let leader = wait_for("a leader holding the lease", RELOAD_WAIT, || async {
        holder(&ns).await.ok_or_else(|| "no holder".to_owned())
    })
    .await;
    let leader_index: usize = leader.trim_start_matches('r').parse().expect("replica name");

    for i in 0..N / 2 {
        set_configmap_data(&ns, &format!("cfg-{i}"), &[("k", "1")]).await;
    }
    replicas[leader_index].kill();
    let killed = Instant::now();
    for i in N / 2..N {
        set_configmap_data(&ns, &format!("cfg-{i}"), &[("k", "1")]).await;
    }
    let new_leader = wait_for("another replica to take the lease", RELOAD_WAIT, || async {
        match holder(&ns).await {
            Some(h) if h != leader => Ok(h),
            other => Err(format!("holder {other:?}")),
        }
    })
    .await;
    let failover = killed.elapsed();
    eprintln!("failover: {leader} killed, {new_leader} leads after {:.1}s", failover.as_secs_f64());

    for i in 0..N {
        Kind::Deployment.wait_revisions(&ns, &format!("web-{i}"), 2).await;
    }
    holds_for("every Deployment to stay at 2 revisions (no duplicate reloads)", QUIET_PERIOD, || async {
        for i in 0..N {
            let got = Kind::Deployment.revisions(&ns, &format!("web-{i}")).await;
            if got != 2 {
                return Err(format!("web-{i} has {got} revisions"));
            }
        }
        Ok(())
    })
    .await;
    for i in 0..N {
        let value = Kind::Deployment.env(&ns, &format!("web-{i}"), "app", &format!("STAKATER_CFG_{i}_CONFIGMAP")).await;
        assert_eq!(value, Some(configmap_hash(&[("k", "1")])), "web-{i}");
    }
    // Only leaders wrote: the third replica never did.
    let idle = (0..3).find(|i| *i != leader_index && format!("r{i}") != new_leader).expect("a follower");
    assert_eq!(replicas[idle].count_log("updated '"), 0, "a follower wrote");

    // SIGTERM releases the lease at once (no waiting for it to expire).
    let new_index: usize = new_leader.trim_start_matches('r').parse().expect("replica name");
    let pid = replicas[new_index].pid().to_string();
    std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert_eq!(replicas[new_index].wait_exit(Duration::from_secs(15)).await, Some(0));
    let released = wait_for("the lease to be released or passed on", Duration::from_secs(2), || async {
        match holder(&ns).await {
            Some(h) if h == new_leader => Err(format!("still held by {h}")),
            other => Ok(other),
        }
    })
    .await;
    eprintln!("after SIGTERM of {new_leader}: holder {released:?}");
}

#[test]
fn ha_without_pod_name_fails_with_upstreams_message() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reloader"))
        .args(["--enable-ha"])
        .env_remove("POD_NAME")
        .env("POD_NAMESPACE", "x")
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("POD_NAME not set, cannot run in HA mode without POD_NAME set")
    );
}

/// The time at the start of a text log line (`2026-12-03T00:22:31.416101Z  WARN …`).
fn logged_at(line: &str) -> jiff::Timestamp {
    let stamp = line.split_whitespace().next().unwrap_or_default();
    stamp.parse().unwrap_or_else(|e| panic!("no timestamp in {line:?}: {e}"))
}

#[tokio::test]
async fn a_leader_that_cannot_renew_steps_down_before_anyone_else_can_lead() {
    use k8s_openapi::api::rbac::v1::Role;
    use kube::api::{Patch, PatchParams};

    let ns = TestNamespace::create("ha-renew").await;
    let watch = ["get", "list", "watch", "patch"];
    let rules = |leases: bool| {
        let mut rules = vec![
            json!({"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["list", "watch"]}),
            json!({"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": watch}),
            json!({"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": watch}),
        ];
        if leases {
            rules.push(json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}));
        }
        rules
    };
    let kubeconfig =
        common::rbac::service_account_with_rules(&ns, "leader", json!(rules(true)), common::rbac::Scope::Namespace)
            .await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();

    let args = [
        "--enable-ha",
        "--leader-election-lease-duration=6s",
        "--leader-election-renew-deadline=4s",
        "--leader-election-retry-period=1s",
    ];
    let first = Reloader::start_with_env(
        &ns.name,
        &args,
        &[("POD_NAME", "first"), ("POD_NAMESPACE", &ns.name), ("KUBECONFIG", &kubeconfig)],
    )
    .await;
    first.wait_log("became leader").await;
    let second =
        Reloader::start_with_env(&ns.name, &args, &[("POD_NAME", "second"), ("POD_NAMESPACE", &ns.name)]).await;

    // The leader can no longer renew (as when the API server stops answering it).
    let revoke = json!({"rules": rules(false)});
    ns.api::<Role>().patch("leader", &PatchParams::default(), &Patch::Merge(&revoke)).await.expect("revoke");
    let stepped_down = first.wait_log("stepping down").await;
    let took_over = second.wait_log("became leader").await;
    assert!(
        logged_at(&stepped_down) < logged_at(&took_over),
        "the old leader stopped only after the new one started:\n{stepped_down}\n{took_over}"
    );
    assert_eq!(holder(&ns).await.as_deref(), Some("second"));
}

/// Issue 27, finding 0: the controller's one runtime thread kept busy (an initial list of thousands of objects,
/// 13 controllers sharing 2 cores) must not keep the leader from renewing. The election runs on its own thread:
/// while this test's runtime thread is blocked for twice the renew deadline, the Lease is still renewed and
/// this replica never stops leading.
#[tokio::test]
async fn a_leader_whose_runtime_is_busy_still_renews() {
    use reloader::{config::LeaderElection, leader::Leadership};

    let ns = TestNamespace::create("ha-busy").await;
    let cfg = LeaderElection {
        lease_name: LEASE.into(),
        namespace: ns.name.clone(),
        identity: "busy".into(),
        lease_seconds: 3,
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
        release_on_cancel: true,
    };
    let leadership = Leadership::elect(kube::Client::try_default(), &cfg);
    let mut is_leader = leadership.is_leader.clone();
    tokio::time::timeout(RELOAD_WAIT, is_leader.wait_for(|l| *l)).await.expect("became leader").expect("elector");
    let blocked_at = jiff::Timestamp::now();

    // Blocks this runtime's only thread, as a long synchronous stretch of index work would.
    std::thread::sleep(2 * cfg.renew_deadline);
    let lease_ns = ns.name.clone();
    let renewed = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let client = kube::Client::try_default().await.expect("client");
            let lease = kube::Api::<Lease>::namespaced(client, &lease_ns).get(LEASE).await.expect("lease");
            lease.spec.and_then(|s| s.renew_time).map(|t| t.0)
        })
    })
    .join()
    .expect("reading the lease");

    let renewed = renewed.expect("a renew time");
    assert!(renewed > blocked_at, "the Lease was not renewed while the runtime was busy: {renewed} <= {blocked_at}");
    assert!(*is_leader.borrow(), "stepped down");
    assert!(!is_leader.has_changed().unwrap_or(true), "leadership changed while the runtime was busy");
    leadership.release().await;
    assert_eq!(holder(&ns).await, None, "released on cancel");
}

/// Issue 27, finding 3: every replica watches and decides, only the leader acts. Three replicas in
/// `--webhook-url` mode see one ConfigMap change and one invalid annotation: the receiver gets one POST and
/// the workload one `InvalidAnnotation` Event (before: three of each).
#[tokio::test]
async fn only_the_leader_sends_webhooks_and_events() {
    let ns = TestNamespace::create("ha-side").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let invalid = json!({"configmap.reloader.stakater.com/reload": "cfg,(oops"});
    Kind::Deployment.create(&ns, "bad", invalid, json!({}), plain_pod()).await;
    let receiver = Receiver::start(Answer::Ok).await;
    let url = format!("--webhook-url={}/hook", receiver.url);
    // The default leases (15 s): a failover in the middle, on a loaded machine, would be a second leader's
    // Event, which is right but not what this test counts.
    let replicas = [
        start_replica_with(&ns, "r0", &[&url]).await,
        start_replica_with(&ns, "r1", &[&url]).await,
        start_replica_with(&ns, "r2", &[&url]).await,
    ];
    // Every replica saw the bad value (each logs it) and one of them leads.
    for r in &replicas {
        r.wait_log("(oops").await;
    }
    wait_for("a leader holding the lease", RELOAD_WAIT, || async {
        holder(&ns).await.ok_or_else(|| "no holder".to_owned())
    })
    .await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    receiver.wait_requests(1).await;
    // Evidence that every replica saw the change before asserting that only one posted.
    for r in &replicas {
        let base = r.http_base().await;
        wait_for("every replica to receive the ConfigMap update", RELOAD_WAIT, || async {
            let (_, metrics) = http_get(&base, "/metrics").await;
            let updates =
                sample(&metrics, r#"reloader_events_received_total{event_type="update",resource_type="configmaps"}"#);
            if updates.unwrap_or(0.0) >= 1.0 { Ok(()) } else { Err(format!("updates: {updates:?}")) }
        })
        .await;
    }
    let invalid_events = || async {
        let events = ns.api::<k8s_openapi::api::events::v1::Event>().list(&Default::default()).await.expect("events");
        let about_bad = |e: &k8s_openapi::api::events::v1::Event| {
            e.reason.as_deref() == Some("InvalidAnnotation")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("bad")
        };
        events.items.into_iter().filter(about_bad).map(|e| e.series.map_or(1, |s| s.count)).sum::<i32>()
    };
    wait_for("an InvalidAnnotation Event on bad", RELOAD_WAIT, || async {
        match invalid_events().await {
            0 => Err("none yet".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    holds_for("one webhook POST and one InvalidAnnotation Event", QUIET_PERIOD, || async {
        let (posts, events) = (receiver.requests().len(), invalid_events().await);
        if posts == 1 && events == 1 {
            Ok(())
        } else {
            Err(format!("{posts} POSTs, {events} InvalidAnnotation Events"))
        }
    })
    .await;
}
