//! Rollout gates on the real control plane (issue 17): the health gate halts a change whose rollout failed and
//! resumes with the next change; waves roll in order; a reload window defers a change across a controller
//! restart and rolls it once when it opens.
//!
//! A failing rollout: the local plane's KWOK keeps a pod unready when its template's label
//! `testenv.reloader.dev/unready-when-reloaded` holds the hash it was reloaded with (testenv/build.sh), so one
//! content of the Secret is "bad" and the next one rolls out fine. On an external cluster (kind, k3d) that rule
//! does not exist: the health-gate test says so and does not run there.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::{apps::v1::Deployment, events::v1::Event};
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

/// A one-replica Deployment mounting Secret/ConfigMap volumes as `pod_spec` says, with `annotations`, pod labels
/// `labels` and `progressDeadlineSeconds: 5`.
async fn deployment(ns: &TestNamespace, name: &str, annotations: Value, labels: Value, pod_spec: Value) {
    let mut labels = labels;
    labels["app"] = json!(name);
    let obj: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "progressDeadlineSeconds": 5,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }
    }))
    .expect("deployment");
    ns.api::<Deployment>().create(&PostParams::default(), &obj).await.expect("create deployment");
}

fn pause_pod(volume: Value) -> Value {
    let mut spec = volume;
    spec["containers"][0]["image"] = json!("registry.k8s.io/pause:3.10");
    spec
}

async fn deployment_status(ns: &TestNamespace, name: &str) -> (bool, Option<String>) {
    let d = ns.api::<Deployment>().get(name).await.expect("get deployment");
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(s) = &d.status else { return (false, None) };
    let observed = s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
    let counts = [s.updated_replicas, s.available_replicas, s.replicas].map(|c| c.unwrap_or(0) == desired);
    let progressing = s.conditions.iter().flatten().find(|c| c.type_ == "Progressing").and_then(|c| c.reason.clone());
    (observed && counts.iter().all(|c| *c), progressing)
}

/// The Events with `reason` on the object `name`, once there is at least one: Events are published after the
/// decision is logged, off the reconcile path, so the log line can come first.
async fn events(ns: &TestNamespace, name: &str, reason: &str) -> Vec<Event> {
    wait_for(&format!("a {reason} Event on {name}"), Duration::from_secs(30), || async {
        let list = ns.api::<Event>().list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let found: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect();
        if found.is_empty() { Err("none yet".to_owned()) } else { Ok(found) }
    })
    .await
}

/// Whether the tests run on the local plane, whose KWOK keeps pods unready for one content; says so when not.
fn local_plane() -> bool {
    let local = std::env::var_os("TESTENV_BIN_DIR").is_some();
    if !local {
        eprintln!(
            "skipped: needs the local plane's KWOK rule for unready pods (testenv/build.sh), not on an external cluster"
        );
    }
    local
}

async fn wait_recorded(ns: &TestNamespace, names: &[String]) {
    wait_for("first-sight records written and rollouts complete", Duration::from_secs(120), || async {
        for name in names {
            let d = ns.api::<Deployment>().get(name).await.map_err(|e| e.to_string())?;
            let recorded =
                d.metadata.annotations.unwrap_or_default().contains_key("reloader.stakater.com/applied-hashes");
            if !recorded || !deployment_status(ns, name).await.0 {
                return Err(format!("{name}: recorded {recorded}"));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_failed_rollout_halts_the_others_until_the_next_change() {
    if !local_plane() {
        return;
    }
    let ns = TestNamespace::create("halt").await;
    create_secret(&ns, "ca", &[("ca.crt", "v1")], &[]).await;
    let bad = secret_hash(&[("ca.crt", "v2-bad")]);
    let names: Vec<String> = (0..6).map(|i| format!("web-{i}")).collect();
    for name in &names {
        let labels = json!({ HELD: bad });
        deployment(&ns, name, json!({"reloader.stakater.com/auto": "true"}), labels, pause_pod(volume_secret("ca")))
            .await;
    }
    let reloader =
        Reloader::start(&ns.name, &["--max-concurrent-rollouts=1", "--halt-on-failed-rollout", "--log-level=debug"])
            .await;
    wait_recorded(&ns, &names).await;

    set_secret_value(&ns, "ca", "ca.crt", "v2-bad").await;
    // One Deployment gets the bad content, cannot progress, and its deadline passes; the five others are held.
    let failed = {
        let mut failed = None;
        let deadline = Instant::now() + Duration::from_secs(90);
        while failed.is_none() {
            for name in &names {
                if deployment_status(&ns, name).await.1.as_deref() == Some("ProgressDeadlineExceeded") {
                    failed = Some(name.clone());
                }
            }
            assert!(Instant::now() < deadline, "no rollout failed within 90 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        failed.unwrap_or_default()
    };
    let base = reloader.http_base().await;
    wait_for("five workloads held", Duration::from_secs(30), || async {
        let (_, metrics) = http_get(&base, "/metrics").await;
        match sample(&metrics, "reloader_waiting_workloads{reason=\"held\"}") {
            Some(5.0) => Ok(()),
            other => Err(format!("held: {other:?}")),
        }
    })
    .await;
    let others: Vec<&String> = names.iter().filter(|n| **n != failed).collect();
    holds_for("the held workloads keep the old content", Duration::from_secs(5), || async {
        for name in &others {
            let value = Kind::Deployment.env(&ns, name, "app", "STAKATER_CA_SECRET").await;
            if value.as_deref() == Some(bad.as_str()) {
                return Err(format!("{name} was rolled with the failed content"));
            }
        }
        Ok(())
    })
    .await;
    for name in &others {
        assert_eq!(Kind::Deployment.revisions(&ns, name).await, 1, "{name} not rolled");
        let held = events(&ns, name, "RolloutHalted").await;
        assert_eq!(held.len(), 1, "{name}: one Warning Event");
        let note = held[0].note.clone().unwrap_or_default();
        assert!(note.contains(&format!("failed on Deployment {}/{failed}", ns.name)), "{note}");
        assert_eq!(held[0].type_.as_deref(), Some("Warning"));
    }
    let (ok, out, err) = explain_with(&ns, &["--halt-on-failed-rollout=true"], &format!("deploy/{}", others[0]), &[]);
    assert!(ok, "{err}");
    let held = format!(
        "  waits: held: the rollout of this change of Secret {}/ca failed on Deployment {}/{failed}",
        ns.name, ns.name
    );
    assert!(out.contains(&held), "{out}");
    let on_secret = events(&ns, "ca", "RolloutHalted").await;
    assert_eq!(on_secret.len(), 1, "one Warning Event on the Secret");
    let note = on_secret[0].note.clone().unwrap_or_default();
    assert!(note.contains("reloader.stakater.com/release-hold="), "{note}");
    assert!(!note.contains("v2-bad") && !note.contains(&bad), "no content or plain hash: {note}");

    // A fixed value: every workload rolls to it, the failed one too, one at a time.
    set_secret_value(&ns, "ca", "ca.crt", "v3").await;
    let good = secret_hash(&[("ca.crt", "v3")]);
    wait_for("all six on the fixed content, rolled out", Duration::from_secs(120), || async {
        for name in &names {
            let value = Kind::Deployment.env(&ns, name, "app", "STAKATER_CA_SECRET").await;
            if value.as_deref() != Some(good.as_str()) || !deployment_status(&ns, name).await.0 {
                return Err(format!("{name}: {value:?}"));
            }
        }
        Ok(())
    })
    .await;
    for name in &others {
        assert_eq!(Kind::Deployment.revisions(&ns, name).await, 2, "{name}: the fixed content only");
    }
    assert_eq!(Kind::Deployment.revisions(&ns, &failed).await, 3, "{failed}: bad, then fixed");
    let (_, metrics) = http_get(&base, "/metrics").await;
    assert_eq!(sample(&metrics, "reloader_waiting_workloads{reason=\"held\"}"), Some(0.0));
}

#[tokio::test]
async fn lower_waves_complete_before_higher_ones_start() {
    let ns = TestNamespace::create("waves").await;
    create_configmap(&ns, "shared", &[("k", "v1")], &[]).await;
    let tiers = [("db", "0"), ("api", "1"), ("web", "2")];
    for (name, wave) in tiers {
        let annotations = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-wave": wave});
        deployment(&ns, name, annotations, json!({}), pause_pod(env_from_configmap("shared"))).await;
    }
    let _reloader = Reloader::start(&ns.name, &[]).await;
    let names: Vec<String> = tiers.iter().map(|(n, _)| (*n).to_owned()).collect();
    wait_recorded(&ns, &names).await;

    set_configmap_data(&ns, "shared", &[("k", "v2")]).await;
    let new = configmap_hash(&[("k", "v2")]);
    // Sampled: a wave's template is never written before the lower wave's rollout is complete.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // Higher waves are read first: a lower wave's completion, once true, stays true, so a written higher
        // wave read before it proves the order (reading the other way round races a wave completing in between).
        let mut state = Vec::new();
        for name in names.iter().rev() {
            let written = Kind::Deployment.env(&ns, name, "app", "STAKATER_SHARED_CONFIGMAP").await.as_deref()
                == Some(new.as_str());
            state.push((written, written && deployment_status(&ns, name).await.0));
        }
        state.reverse();
        for pair in state.windows(2) {
            assert!(!pair[1].0 || pair[0].1, "a higher wave started before the lower one completed: {state:?}");
        }
        if state.iter().all(|(_, done)| *done) {
            break;
        }
        assert!(Instant::now() < deadline, "waves did not finish: {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for name in &names {
        assert_eq!(Kind::Deployment.revisions(&ns, name).await, 2, "{name} rolled once");
    }
}

/// `HH:MM` of a UTC timestamp.
fn hh_mm(t: jiff::Timestamp) -> String {
    t.to_zoned(jiff::tz::TimeZone::UTC).strftime("%H:%M").to_string()
}

#[tokio::test]
async fn a_window_defers_a_change_across_a_restart_and_rolls_it_once_when_it_opens() {
    let ns = TestNamespace::create("window").await;
    create_configmap(&ns, "cfg", &[("k", "v1")], &[]).await;
    // Opens at the first whole minute at least 60 s from now (the minute boundary is the window's grain); the
    // steps before it opens take a few seconds, 60 leaves room for a loaded machine.
    let now = jiff::Timestamp::now();
    let opens = jiff::Timestamp::from_second((now.as_second() + 60 + 59) / 60 * 60).expect("time");
    let window = format!("* {}-{} UTC", hh_mm(opens), hh_mm(opens + jiff::SignedDuration::from_mins(30)));
    let annotations = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/reload-window": window});
    Kind::Deployment.create(&ns, "web", annotations, json!({}), env_from_configmap("cfg")).await;
    let mut reloader = Reloader::start(&ns.name, &[]).await;
    wait_recorded(&ns, &["web".to_owned()]).await;

    set_configmap_data(&ns, "cfg", &[("k", "v2")]).await;
    reloader.wait_log("outside its reload window").await;
    let (_, metrics) = http_get(&reloader.http_base().await, "/metrics").await;
    assert_eq!(sample(&metrics, "reloader_waiting_workloads{reason=\"window\"}"), Some(1.0), "{metrics}");
    let deferred = events(&ns, "web", "ReloadDeferred").await;
    assert_eq!(deferred.len(), 1, "one Event");
    assert!(deferred[0].note.clone().unwrap_or_default().contains(&format!("opens at {opens}")), "{deferred:?}");
    let (ok, out, err) = explain_with(&ns, &[], "deploy/web", &[]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("  waits: outside its reload window \"{window}\"; rolls when it opens at {opens}")),
        "{out}"
    );

    // The controller goes away; the content changes again while it is down; a new one still waits.
    reloader.kill();
    set_configmap_data(&ns, "cfg", &[("k", "v3")]).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    reloader.wait_log("outside its reload window").await;
    assert_eq!(Kind::Deployment.revisions(&ns, "web").await, 1, "nothing rolled before the window");
    assert!(jiff::Timestamp::now() < opens, "the test reached this point before the window opened");

    let v3 = configmap_hash(&[("k", "v3")]);
    wait_for("the reload when the window opens", Duration::from_secs(120), || async {
        let value = Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await;
        if value.as_deref() == Some(v3.as_str()) { Ok(()) } else { Err(format!("{value:?}")) }
    })
    .await;
    assert!(jiff::Timestamp::now() >= opens, "not before it opened");
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
}

#[tokio::test]
async fn a_held_change_is_released_by_its_hold_id_and_alerted() {
    if !local_plane() {
        return;
    }
    let ns = TestNamespace::create("release").await;
    create_secret(&ns, "ca", &[("ca.crt", "v1")], &[]).await;
    let bad = secret_hash(&[("ca.crt", "v2-bad")]);
    let labels = json!({ HELD: bad });
    let auto = json!({"reloader.stakater.com/auto": "true"});
    deployment(&ns, "first", auto.clone(), labels.clone(), pause_pod(volume_secret("ca"))).await;
    // The second opts in by annotation (no flag), and waits for the first by its wave.
    let mut second = auto;
    second["reloader.stakater.com/rollout-wave"] = json!("1");
    second["reloader.stakater.com/halt-on-failed-rollout"] = json!("true");
    deployment(&ns, "second", second, labels, pause_pod(volume_secret("ca"))).await;
    let receiver = Receiver::start(Answer::Ok).await;
    let env = [("ALERT_ON_RELOAD", "true"), ("ALERT_SINK", "webhook"), ("ALERT_WEBHOOK_URL", receiver.url.as_str())];
    let _reloader = Reloader::start_with_env(&ns.name, &[], &env).await;
    wait_recorded(&ns, &["first".to_owned(), "second".to_owned()]).await;

    set_secret_value(&ns, "ca", "ca.crt", "v2-bad").await;
    // The first rolls (one alert) and fails; the second is held (one alert naming the hold id).
    let requests = receiver.wait_requests(2).await;
    let halted: Vec<&Received> = requests.iter().filter(|r| r.body.contains("failed on")).collect();
    assert_eq!(halted.len(), 1, "{requests:?}");
    let body = &halted[0].body;
    assert!(
        body.contains(&format!(
            "the rollout of the change of Secret {}/ca failed on Deployment {}/first",
            ns.name, ns.name
        )),
        "{body}"
    );
    let hold_id: String = body.split("release-hold=").nth(1).unwrap_or_default().chars().take(12).collect();
    assert_eq!(hold_id.len(), 12, "{body}");
    assert!(!body.contains(&bad) && !body.contains("v2-bad"), "no content or plain hash: {body}");
    assert_eq!(Kind::Deployment.env(&ns, "second", "app", "STAKATER_CA_SECRET").await, None, "held");

    // Released: the second rolls the same content, knowingly.
    let patch = json!({"metadata": {"annotations": {"reloader.stakater.com/release-hold": hold_id}}});
    let secrets = ns.api::<k8s_openapi::api::core::v1::Secret>();
    secrets.patch("ca", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.expect("annotate");
    wait_for("the released change to roll the second", Duration::from_secs(60), || async {
        let value = Kind::Deployment.env(&ns, "second", "app", "STAKATER_CA_SECRET").await;
        if value.as_deref() == Some(bad.as_str()) { Ok(()) } else { Err(format!("{value:?}")) }
    })
    .await;
}

#[tokio::test]
async fn a_namespace_window_applies_to_its_workloads_and_lifting_it_rolls_what_waited() {
    let ns = TestNamespace::create("ns-window").await;
    create_configmap(&ns, "cfg", &[("k", "v1")], &[]).await;
    // A window that opens hours from now: closed for the whole test.
    let opens = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(3);
    let window = format!("* {}-{} UTC", hh_mm(opens), hh_mm(opens + jiff::SignedDuration::from_hours(1)));
    let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(testenv::harness::client().await);
    let annotate = |value: Value| json!({"metadata": {"annotations": {"reloader.stakater.com/reload-window": value}}});
    let pp = kube::api::PatchParams::default();
    namespaces.patch(&ns.name, &pp, &kube::api::Patch::Merge(&annotate(json!(window)))).await.expect("annotate");
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let reloader = Reloader::start(&ns.name, &["--namespace-reload-windows"]).await;
    wait_recorded(&ns, &["web".to_owned()]).await;

    set_configmap_data(&ns, "cfg", &[("k", "v2")]).await;
    reloader.wait_log("outside its reload window").await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    let (ok, out, err) = explain_with(&ns, &["--namespace-reload-windows=true"], "deploy/web", &[]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("  waits: outside its reload window \"{window}\"")), "{out}");

    // The namespace's window is removed: what waited rolls now, once.
    namespaces.patch(&ns.name, &pp, &kube::api::Patch::Merge(&annotate(Value::Null))).await.expect("remove");
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let v2 = configmap_hash(&[("k", "v2")]);
    assert_eq!(Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await.as_deref(), Some(v2.as_str()));

    // An invalid window is reported once per value — a log line and an Event on the Namespace (written in
    // `default`, as Kubernetes does for cluster-scoped objects) — however often the namespace changes.
    let bad = "Mon-Fri 25:00-26:00 UTC";
    namespaces.patch(&ns.name, &pp, &kube::api::Patch::Merge(&annotate(json!(bad)))).await.expect("annotate");
    reloader.wait_log(bad).await;
    let relabel = json!({"metadata": {"labels": {"touched": "yes"}}});
    namespaces.patch(&ns.name, &pp, &kube::api::Patch::Merge(&relabel)).await.expect("relabel");
    set_configmap_data(&ns, "cfg", &[("k", "v3")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 3).await;
    assert_eq!(reloader.count_log(bad), 1, "one report per value");
    let events =
        kube::Api::<k8s_openapi::api::events::v1::Event>::namespaced(testenv::harness::client().await, "default");
    wait_for("an InvalidAnnotation Event on the namespace", RELOAD_WAIT, || async {
        let list = events.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let on_ns = list.items.iter().filter(|e| {
            e.reason.as_deref() == Some("InvalidAnnotation")
                && e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("Namespace") && r.name.as_deref() == Some(ns.name.as_str())
                })
        });
        let notes: Vec<String> = on_ns.filter_map(|e| e.note.clone()).collect();
        match notes.as_slice() {
            [one] if one.contains(bad) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
