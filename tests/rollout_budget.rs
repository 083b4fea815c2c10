//! The restart budget on the real control plane (issue 17): with `--max-concurrent-rollouts=3`, a Secret shared
//! by 30 Deployments rotates and never more than 3 of them are rolling at once (their status sampled), all 30 end
//! on the new content, and a second rotation during the waves rolls the waiting ones once, with the latest
//! content. Sampling follows the definition (a Deployment's status not yet complete); the controller's
//! first-sight records are written and observed before the rotation, since a Deployment's generation also moves
//! with its annotations.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

const COUNT: usize = 30;

/// Deployments whose rollout is not complete: the controller has not observed the template yet, or not every
/// replica is updated and available (the definition, independent of the controller's code).
async fn rolling(ns: &TestNamespace) -> usize {
    let list = ns.api::<Deployment>().list(&ListParams::default()).await.expect("list deployments");
    list.items
        .iter()
        .filter(|d| {
            let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let Some(s) = &d.status else { return true };
            let observed = s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
            let counts = [s.updated_replicas, s.available_replicas, s.replicas].map(|c| c.unwrap_or(0) == desired);
            !(observed && counts.iter().all(|c| *c))
        })
        .count()
}

/// Samples [`rolling`] until every Deployment has `revisions` and none is rolling; returns the most seen at once.
async fn sample_until_done(ns: &TestNamespace, revisions: impl Fn(usize) -> bool) -> usize {
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut most = 0;
    loop {
        let now_rolling = rolling(ns).await;
        most = most.max(now_rolling);
        let mut done = now_rolling == 0;
        if done {
            for i in 0..COUNT {
                done &= revisions(Kind::Deployment.revisions(ns, &format!("web-{i}")).await);
            }
        }
        if done {
            return most;
        }
        assert!(Instant::now() < deadline, "the waves did not finish within 240 s (most rolling at once: {most})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_budget_of_three_rolls_thirty_deployments_three_at_a_time() {
    let ns = TestNamespace::create("budget").await;
    create_secret(&ns, "shared", &[("ca.crt", "v1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    // Pods that become available on a real cluster too (kind, k3d): rollouts must complete here.
    let mut pod_spec = volume_secret("shared");
    pod_spec["containers"][0]["image"] = json!("registry.k8s.io/pause:3.10");
    // A pod counts as available only after a second: each wave lasts that long, so the sampling sees it also when
    // a loaded machine answers a LIST slower than KWOK's instant pods roll out (a run under `make test` saw none).
    let min_ready = Patch::Merge(json!({"spec": {"minReadySeconds": 1}}));
    for i in 0..COUNT {
        let name = format!("web-{i}");
        Kind::Deployment.create(&ns, &name, auto.clone(), json!({}), pod_spec.clone()).await;
        ns.api::<Deployment>().patch(&name, &PatchParams::default(), &min_ready).await.expect("minReadySeconds");
    }
    wait_for("every Deployment rolled out", Duration::from_secs(120), || async {
        let n = rolling(&ns).await;
        if n == 0 { Ok(()) } else { Err(format!("{n} rolling")) }
    })
    .await;
    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=3"]).await;
    // The controller's first-sight records are metadata writes, and a Deployment's generation counts annotation
    // changes: let the Deployment controller observe them before sampling.
    wait_for("every record written and observed", Duration::from_secs(120), || async {
        let list = ns.api::<Deployment>().list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let recorded =
            list.items.iter().filter(|d| d.annotations().contains_key("reloader.stakater.com/applied-hashes"));
        let (recorded, now_rolling) = (recorded.count(), rolling(&ns).await);
        if recorded == COUNT && now_rolling == 0 {
            Ok(())
        } else {
            Err(format!("{recorded} recorded, {now_rolling} rolling"))
        }
    })
    .await;

    set_secret_value(&ns, "shared", "ca.crt", "v2").await;
    let most = sample_until_done(&ns, |r| r == 2).await;
    assert!(most <= 3, "at most 3 rolling at once, saw {most}");
    assert!(most >= 1, "the sampling saw the waves");
    let v2 = secret_hash(&[("ca.crt", "v2")]);
    for i in 0..COUNT {
        let value = Kind::Deployment.env(&ns, &format!("web-{i}"), "app", "STAKATER_SHARED_SECRET").await;
        assert_eq!(value.as_deref(), Some(v2.as_str()), "web-{i}");
    }
    let (_, metrics) = http_get(&reloader.http_base().await, "/metrics").await;
    assert_eq!(sample(&metrics, "reloader_rollouts{state=\"waiting\"}"), Some(0.0), "{metrics}");

    // Two rotations in a row: the workloads still waiting for a slot roll once, with the latest content.
    set_secret_value(&ns, "shared", "ca.crt", "v3").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    set_secret_value(&ns, "shared", "ca.crt", "v4").await;
    let most = sample_until_done(&ns, |r| (3..=4).contains(&r)).await;
    assert!(most <= 3, "at most 3 rolling at once, saw {most}");
    // Nothing rolling and every revision at 3 or 4 can also be the moment between a rollout's end and the write of
    // a workload that rolled v3 and waits for a slot for v4: each must end on v4.
    let v4 = secret_hash(&[("ca.crt", "v4")]);
    wait_for("every Deployment on the latest content", Duration::from_secs(60), || async {
        let mut behind = Vec::new();
        for i in 0..COUNT {
            let name = format!("web-{i}");
            if Kind::Deployment.env(&ns, &name, "app", "STAKATER_SHARED_SECRET").await.as_deref() != Some(v4.as_str()) {
                behind.push(name);
            }
        }
        if behind.is_empty() { Ok(()) } else { Err(format!("not yet on v4: {behind:?}")) }
    })
    .await;
    let mut once = 0;
    for i in 0..COUNT {
        once += usize::from(Kind::Deployment.revisions(&ns, &format!("web-{i}")).await == 3);
    }
    assert!(once >= COUNT / 2, "most waited and rolled once for both rotations ({once} of {COUNT})");
}

/// Issue 27: the budget is read from the cluster. A controller that starts (or takes over as leader) while a
/// rollout it started is running counts it: here the previous controller reloaded `ours`, whose new pod is held
/// not Ready, so with `--max-concurrent-rollouts=1` a change for `web` waits until `ours` completes. Before, a new
/// controller started from an empty budget and rolled `web` at once, beside the rollout already running.
/// Issue 38: only rollouts this controller started are counted (it wrote the spec last, by `managedFields`):
/// `users`, halfway through a template change of its own whose new pod can never be scheduled, takes no slot —
/// counted, it kept `web` waiting for as long as that deploy hung.
#[tokio::test]
async fn only_a_rollout_this_controller_started_holds_a_slot_after_a_restart() {
    let ns = TestNamespace::create("budget-adopt").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_configmap(&ns, "ours-cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    create_held_deployment(&ns, "ours", auto, env_from_configmap("ours-cfg")).await;
    let deployments = ns.api::<Deployment>();
    let plain = json!({"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]});
    Kind::Deployment.create(&ns, "users", json!({}), json!({}), plain).await;
    wait_for("all rolled out", Duration::from_secs(120), || async {
        let n = rolling(&ns).await;
        if n == 0 { Ok(()) } else { Err(format!("{n} rolling")) }
    })
    .await;
    // A user's new template whose pod no node takes: the new pod stays Pending beside the old one, the rollout half
    // done. (A paused Deployment would not do: it rolls nothing, so it is never counted.)
    let hold = json!({"spec": {"template": {"spec": {"nodeSelector": {"reloader-test/no-such-node": "x"}}}}});
    deployments.patch("users", &PatchParams::default(), &Patch::Merge(&hold)).await.expect("hold users");
    // The first controller rolls `ours`; its new pod stays not Ready, so that rollout is still running when the
    // controller is gone.
    let mut first = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "ours").await;
    Kind::Deployment.wait_recorded(&ns, "web").await;
    set_configmap_data(&ns, "ours-cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "ours", 2).await;
    first.kill();
    wait_for("ours and users halfway through their rollouts", Duration::from_secs(60), || async {
        let mut halfway = Vec::new();
        for name in ["ours", "users"] {
            let d = deployments.get(name).await.map_err(|e| e.to_string())?;
            let s = d.status.unwrap_or_default();
            let observed = s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
            if !(observed && s.replicas == Some(2) && s.updated_replicas == Some(1)) {
                halfway.push(format!("{name}: {s:?}"));
            }
        }
        if halfway.is_empty() { Ok(()) } else { Err(halfway.join("; ")) }
    })
    .await;

    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=1"]).await;
    let base = reloader.http_base().await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("web waiting for the slot ours holds", RELOAD_WAIT, || async {
        let (_, metrics) = http_get(&base, "/metrics").await;
        match sample(&metrics, "reloader_rollouts{state=\"waiting\"}") {
            Some(w) if w >= 1.0 => Ok(()),
            other => {
                Err(format!("waiting: {other:?}; web revisions: {}", Kind::Deployment.revisions(&ns, "web").await))
            }
        }
    })
    .await;
    assert_eq!(Kind::Deployment.revisions(&ns, "web").await, 1, "web rolled beside the rollout already running");

    // ours completes; users' deploy still hangs, and holds no slot: web rolls.
    release_held_pods(&ns, "ours").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let value = Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await;
    assert_eq!(value, Some(configmap_hash(&[("k", "2")])));
    assert!(rolling(&ns).await >= 1, "users' deploy is still hanging");
}

/// Issue 27: a write that changes no template frees its budget slot at once. StatefulSet `pre` already runs with
/// `cfg`'s content in its template while its `applied-hashes` record names an older one (what a retry meets after
/// a lost response: the first attempt rolled it), so the controller writes it — the record, and a template equal
/// to the one it has: no new generation, no rollout. With `--max-concurrent-rollouts=1` that write held the only
/// slot until `--rollout-timeout` (and then counted as a failed rollout); `web` must roll at once instead.
#[tokio::test]
async fn a_write_that_changes_no_template_frees_its_slot_at_once() {
    use k8s_openapi::api::apps::v1::StatefulSet;

    let ns = TestNamespace::create("budget-noop").await;
    create_configmap(&ns, "cfg", &[("k", "2")], &[]).await;
    create_configmap(&ns, "other", &[("k", "1")], &[]).await;
    let stale = format!("{{\"configmap/cfg\":\"{}\"}}", configmap_hash(&[("k", "1")]));
    let meta = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/applied-hashes": stale});
    let mut pre = env_from_configmap("cfg");
    pre["containers"][0]["image"] = json!("registry.k8s.io/pause:3.10");
    pre["containers"][0]["env"] = json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": configmap_hash(&[("k", "2")])}]);
    Kind::StatefulSet.create(&ns, "pre", meta, json!({}), pre).await;
    let mut web = env_from_configmap("other");
    web["containers"][0]["image"] = json!("registry.k8s.io/pause:3.10");
    Kind::Deployment.create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), web).await;
    let statefulsets = ns.api::<StatefulSet>();
    wait_for("pre rolled out", Duration::from_secs(120), || async {
        let s = statefulsets.get("pre").await.map_err(|e| e.to_string())?;
        let status = s.status.unwrap_or_default();
        let observed = status.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0);
        let same = status.current_revision.is_some() && status.current_revision == status.update_revision;
        if observed && same && status.ready_replicas == Some(1) { Ok(()) } else { Err(format!("{status:?}")) }
    })
    .await;
    wait_for("web rolled out", Duration::from_secs(120), || async {
        let n = rolling(&ns).await;
        if n == 0 { Ok(()) } else { Err(format!("{n} rolling")) }
    })
    .await;

    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=1", "--rollout-timeout=10m"]).await;
    reloader.wait_log("updated 'pre'").await;
    set_configmap_data(&ns, "other", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(Kind::StatefulSet.revisions(&ns, "pre").await, 1, "pre's write rolled it");
}

/// Writes that start no rollout hold no slot: a StatefulSet with `updateStrategy: OnDelete` gets the new template,
/// but its controller replaces no pod until one is deleted (upstream #294), and a paused Deployment (`kubectl
/// rollout pause`) rolls nothing until resumed. With `--max-concurrent-rollouts=1` the first of them held the only
/// slot until `--rollout-timeout` (and then counted as a failed rollout for the health gate): the other waited, and
/// so did `web`. All three must be written at once.
#[tokio::test]
async fn writes_that_start_no_rollout_hold_no_slot() {
    use k8s_openapi::api::apps::v1::StatefulSet;

    let ns = TestNamespace::create("budget-norollout").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_configmap(&ns, "other", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::StatefulSet.create(&ns, "db", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    let on_delete = Patch::Merge(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    ns.api::<StatefulSet>().patch("db", &PatchParams::default(), &on_delete).await.expect("OnDelete");
    Kind::Deployment.create(&ns, "paused", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "web", auto, json!({}), env_from_configmap("other")).await;
    wait_for("the Deployments rolled out", Duration::from_secs(120), || async {
        let n = rolling(&ns).await;
        if n == 0 { Ok(()) } else { Err(format!("{n} rolling")) }
    })
    .await;
    let pause = Patch::Merge(json!({"spec": {"paused": true}}));
    ns.api::<Deployment>().patch("paused", &PatchParams::default(), &pause).await.expect("pause");

    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=1", "--rollout-timeout=10m"]).await;
    Kind::StatefulSet.wait_recorded(&ns, "db").await;
    for name in ["paused", "web"] {
        Kind::Deployment.wait_recorded(&ns, name).await;
    }
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("updated 'db'").await;
    reloader.wait_log("updated 'paused'").await;
    let v2 = Some(configmap_hash(&[("k", "2")]));
    assert_eq!(Kind::StatefulSet.env(&ns, "db", "app", "STAKATER_CFG_CONFIGMAP").await, v2, "db is written");
    assert_eq!(Kind::Deployment.env(&ns, "paused", "app", "STAKATER_CFG_CONFIGMAP").await, v2, "paused too");
    set_configmap_data(&ns, "other", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(Kind::Deployment.revisions(&ns, "paused").await, 1, "paused rolls nothing");
}
