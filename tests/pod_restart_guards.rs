//! What `evict-pods` and `delete-pods` never do, on the real control plane (issue 38; SECURITY.md's threat model):
//! restart a pod the workload does not own, take more than one of its pods down, go on when the owner's controller
//! does not create the replacement, delete past a PodDisruptionBudget, or go on while the workload is paused; and
//! they judge time by the API server's clock.

mod common;
#[path = "pod_restarts/support.rs"]
mod support;

use std::time::Duration;

use common::*;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::ResourceQuota,
    events::v1::Event,
    policy::v1::PodDisruptionBudget,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use support::*;

/// The pods restarted are the workload's own by their owner chain (Deployment → ReplicaSet → Pod), not whatever
/// its selector finds: a neighbour whose labels overlap is neither restarted nor waited for, even with a pod that
/// never becomes Ready (issue 38, finding 2: `web-canary`'s pod was deleted for `web`, and a pending one stalled
/// `web` forever).
#[tokio::test]
async fn only_the_workloads_own_pods_are_restarted_or_waited_for() {
    let ns = TestNamespace::create("own-pods").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    // The canary's pod is the oldest `app=web` pod: the one a selector-only restart takes first.
    create_neighbour(&ns, "web-canary", "canary", true).await;
    let canary = selected_ready(&ns, "track=canary", 1).await;
    create_neighbour(&ns, "web-pending", "pending", false).await;
    create_deployment(&ns, "web", 2, "delete-pods").await;
    let original = selected_ready(&ns, "app=web,!track", 2).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("restarted every pod of Deployment 'web'").await;
    assert_eq!(reloader.count_log("deleted pod"), 2, "{:#?}", reloader.logs());
    assert_eq!(reloader.count_log("deleted pod web-canary"), 0, "{:#?}", reloader.logs());
    assert!(selected_ready(&ns, "app=web,!track", 2).await.is_disjoint(&original));
    assert_eq!(selected_ready(&ns, "track=canary", 1).await, canary, "the neighbour's pod is untouched");
}

/// A DaemonSet has no `spec.replicas`: the pods it should have are its status's `desiredNumberScheduled`. When the
/// replacement of a restarted pod does not come — a ResourceQuota refuses it here, as a stopped or slow
/// kube-controller-manager would never create it — the restarts stop with one pod down, say so once they have
/// waited `--rollout-timeout` (log line, `ReloadFail` Event, `reloader_pod_restarts_stalled`), and go on by
/// themselves when it comes (issue 38, finding 1: both pods were deleted within a second).
#[tokio::test]
async fn a_daemon_set_whose_replacement_does_not_come_loses_one_pod_and_goes_on_when_it_comes() {
    let ns = TestNamespace::create("ds-restarts").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let annotations =
        json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "delete-pods"});
    Kind::DaemonSet.create(&ns, "ds", annotations, json!({}), env_from_configmap("cfg")).await;
    let original = ready_pods(&ns, "ds", 2).await;
    let quota: ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}})).expect("quota");
    let quotas = ns.api::<ResourceQuota>();
    quotas.create(&PostParams::default(), &quota).await.expect("create quota");
    wait_for("the quota's usage", RELOAD_WAIT, || async {
        let q = quotas.get("pods").await.map_err(|e| e.to_string())?;
        let used = q.status.and_then(|s| s.used).and_then(|u| u.get("pods").cloned());
        used.map(|_| ()).ok_or_else(|| "not counted yet".to_owned())
    })
    .await;
    let reloader = Reloader::start(&ns.name, &["--rollout-timeout=3s"]).await;
    Kind::DaemonSet.wait_recorded(&ns, "ds").await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("deleted pod ds-").await;
    let stalled = reloader.wait_log("are not restarted: none restarted for 3s").await;
    assert!(stalled.contains("1 of 2 pods exist"), "{stalled}");
    assert_eq!(reloader.count_log("deleted pod ds-"), 1, "{:#?}", reloader.logs());
    let left = ready_pods(&ns, "ds", 1).await;
    assert!(left.is_subset(&original), "the other pod still runs: {left:?} of {original:?}");
    let metrics = http_get(&reloader.http_base().await, "/metrics").await.1;
    assert_eq!(sample(&metrics, "reloader_pod_restarts_stalled"), Some(1.0), "{metrics}");
    wait_for("a ReloadFail Event saying what the restarts wait for", RELOAD_WAIT, || async {
        let events = ns.api::<Event>().list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let said = events.iter().any(|e| {
            e.reason.as_deref() == Some("ReloadFail")
                && e.note.as_deref().is_some_and(|n| n.contains("1 of 2 pods exist"))
        });
        if said { Ok(()) } else { Err(format!("{events:#?}")) }
    })
    .await;

    // The quota lifted (and the DaemonSet touched, so its controller looks again at once): the replacement comes,
    // and the restarts go on by themselves.
    quotas.delete("pods", &DeleteParams::default()).await.expect("delete quota");
    let touch = Patch::Merge(json!({"metadata": {"labels": {"touched": "1"}}}));
    ns.api::<DaemonSet>().patch("ds", &PatchParams::default(), &touch).await.expect("touch");
    assert!(
        reloader.has_log_within("restarted every pod of DaemonSet 'ds'", Duration::from_secs(90)).await,
        "{:#?}",
        reloader.logs()
    );
    assert_eq!(reloader.count_log("go on"), 1, "said once that they go on");
    assert_eq!(reloader.count_log("deleted pod ds-"), 2);
    assert!(ready_pods(&ns, "ds", 2).await.is_disjoint(&original));
    let metrics = http_get(&reloader.http_base().await, "/metrics").await.1;
    assert_eq!(sample(&metrics, "reloader_pod_restarts_stalled"), Some(0.0), "{metrics}");
}

/// `delete-pods` asks the pods' PodDisruptionBudgets first (a dry-run eviction): a budget that allows no disruption
/// holds the deletes back as it holds evictions (issue 38: `delete-pods` deleted whatever the budget said); once it
/// is gone the pods are deleted.
#[tokio::test]
async fn delete_pods_asks_the_pod_disruption_budgets_first() {
    let ns = TestNamespace::create("delete-pdb").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_deployment(&ns, "web", 2, "delete-pods").await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    ns.api::<PodDisruptionBudget>().create(&PostParams::default(), &pdb).await.expect("create pdb");
    let original = ready_pods(&ns, "web", 2).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let held = reloader.wait_log("deleting pod web-").await;
    assert!(held.contains("disruption budget"), "{held}");
    assert_eq!(reloader.count_log("deleted pod"), 0, "{:#?}", reloader.logs());
    assert_eq!(ready_pods(&ns, "web", 2).await, original, "nothing deleted behind the budget");

    ns.api::<PodDisruptionBudget>().delete("web", &DeleteParams::default()).await.expect("delete pdb");
    assert!(
        reloader.has_log_within("restarted every pod of Deployment 'web'", Duration::from_secs(90)).await,
        "{:#?}",
        reloader.logs()
    );
    assert_eq!(reloader.count_log("deleted pod"), 2);
    assert!(ready_pods(&ns, "web", 2).await.is_disjoint(&original));
}

/// `reloader.stakater.com/pause: "true"` stops restarts in progress, as it holds reloads; lifted, they go on
/// (issue 38). The replacements take a second and a half to become Ready, so the pause lands mid-way.
#[tokio::test]
async fn a_pause_stops_restarts_in_progress_and_lifting_it_lets_them_finish() {
    let ns = TestNamespace::create("evict-pause").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_slow_deployment(&ns, "web", 3, "evict-pods").await;
    let kubelet = slow_kubelet(&ns, "web", Duration::from_millis(1500));
    let original = ready_pods(&ns, "web", 3).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("evicted pod web-").await;
    let pause = Patch::Merge(json!({"metadata": {"annotations": {"reloader.stakater.com/pause": "true"}}}));
    ns.api::<Deployment>().patch("web", &PatchParams::default(), &pause).await.expect("pause");
    reloader.wait_log("the pod restarts of").await;
    let evicted = reloader.count_log("evicted pod web-");
    assert!(evicted < 3, "the pause came after every eviction: {:#?}", reloader.logs());
    // Stopped: with the replacement Ready, a reconcile of `web` (its metadata touched) looks again and evicts
    // nothing more.
    ready_pods(&ns, "web", 3).await;
    let reconciled = reloader.counter(r#"reloader_reconcile_total{result="skipped"}"#).await;
    let touch = Patch::Merge(json!({"metadata": {"labels": {"touched": "1"}}}));
    ns.api::<Deployment>().patch("web", &PatchParams::default(), &touch).await.expect("touch");
    reconciled.wait_grown(1).await;
    assert_eq!(reloader.count_log("evicted pod web-"), evicted, "{:#?}", reloader.logs());

    let lift = Patch::Merge(json!({"metadata": {"annotations": {"reloader.stakater.com/pause": null}}}));
    ns.api::<Deployment>().patch("web", &PatchParams::default(), &lift).await.expect("lift the pause");
    assert!(
        reloader.has_log_within("restarted every pod of Deployment 'web'", Duration::from_secs(90)).await,
        "{:#?}",
        reloader.logs()
    );
    assert_eq!(reloader.count_log("evicted pod web-"), 3);
    assert!(ready_pods(&ns, "web", 3).await.is_disjoint(&original));
    kubelet.abort();
}

/// Issue 38: restarts wait for their boundary by the API server's clock, not this host's. The proxy between the
/// controller and the API server dates every answer 20 s earlier, as an API server whose clock is 20 s behind
/// this host's would: the boundary (the change's time, stamped by the API server, rounded up to its next second) is
/// then ahead of the API server's now, and a pod created before the API server's clock passes it would count as
/// older than the change and be restarted twice. The boundary is written at once and no pod is evicted until then;
/// by this host's clock (before) the first eviction came at once.
#[tokio::test]
async fn restarts_wait_for_their_boundary_by_the_api_servers_clock() {
    let ns = TestNamespace::create("server-clock").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_deployment(&ns, "web", 2, "evict-pods").await;
    let original = ready_pods(&ns, "web", 2).await;
    let proxy = common::proxy::LosingProxy::start(&ns.name, "/deployments/web").await;
    proxy.shift_clock(-20);
    let kubeconfig = proxy.kubeconfig().display().to_string();
    let scope = format!("--namespaces={}", ns.name);
    let _reloader = Reloader::start_unscoped(&[scope.as_str()], &[("KUBECONFIG", kubeconfig.as_str())]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let deployments = ns.api::<Deployment>();
    wait_for("the boundary written", RELOAD_WAIT, || async {
        let d = deployments.get("web").await.map_err(|e| e.to_string())?;
        let written = d.metadata.annotations.unwrap_or_default().contains_key(BOUNDARY);
        if written { Ok(()) } else { Err("no boundary yet".to_owned()) }
    })
    .await;
    holds_for("no pod evicted before the API server's clock passes the boundary", Duration::from_secs(10), || async {
        let pods = ns.api::<k8s_openapi::api::core::v1::Pod>().list(&ListParams::default().labels("app=web")).await;
        let names: std::collections::BTreeSet<String> =
            pods.map_err(|e| e.to_string())?.items.into_iter().filter_map(|p| p.metadata.name).collect();
        if names == original { Ok(()) } else { Err(format!("pods now {names:?}, before {original:?}")) }
    })
    .await;
    wait_for("both pods replaced once the API server's clock passed the boundary", RELOAD_WAIT, || async {
        let now = ready_pods(&ns, "web", 2).await;
        if now.is_disjoint(&original) { Ok(()) } else { Err(format!("still {:?}", now.intersection(&original))) }
    })
    .await;
}
