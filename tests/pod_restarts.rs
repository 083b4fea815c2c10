//! The `evict-pods` and `delete-pods` rollout strategies on the real control plane (issue 29): the template is never
//! written (an operator that owns it would revert it); the pods created before the change are restarted one at a
//! time — through the Eviction API, so a PodDisruptionBudget holds them back — and a controller killed mid-way is
//! followed by one that finishes from what the cluster shows.

mod common;
#[path = "pod_restarts/support.rs"]
mod support;

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod, policy::v1::PodDisruptionBudget};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use support::*;

#[tokio::test]
async fn evict_pods_restarts_each_pod_once_one_at_a_time_behind_a_pdb_and_finishes_after_a_kill() {
    let ns = TestNamespace::create("evict-pods").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    // Each pod becomes Ready a second and a half after it is created, replacements too.
    create_slow_deployment(&ns, "web", 3, "evict-pods").await;
    let kubelet = slow_kubelet(&ns, "web", Duration::from_millis(1500));
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    ns.api::<PodDisruptionBudget>().create(&PostParams::default(), &pdb).await.expect("create pdb");
    let original = ready_pods(&ns, "web", 3).await;
    let first = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;

    // Sampled throughout: never more than one pod down (terminating, missing or not Ready).
    let (stop, worst) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let sampler = {
        let (stop, worst, api) = (stop.clone(), worst.clone(), ns.api::<Pod>());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(list) = api.list(&ListParams::default().labels("app=web")).await {
                    let ready = list.items.iter().filter(|p| is_ready(p)).count();
                    worst.fetch_max(3usize.saturating_sub(ready), Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let line = first.wait_log("updated 'web' of type").await;
    assert!(line.contains("rollout_strategy=evict-pods"), "{line}");
    // The budget allows no disruption: the eviction waits (never a delete instead).
    first.wait_log("waits: Cannot evict pod as it would violate the pod's disruption budget").await;
    let now = annotations(&ns, "web").await;
    assert!(now.contains_key(BOUNDARY) && now[APPLIED].contains(&configmap_hash(&[("k", "2")])), "{now:?}");
    assert_eq!(ready_pods(&ns, "web", 3).await, original, "nothing evicted behind the budget");

    // The budget removed: from here only the controller's pacing keeps the pods one at a time (the sampler's
    // "never two down" would catch it taking a second pod before the first one's replacement is Ready).
    ns.api::<PodDisruptionBudget>().delete("web", &DeleteParams::default()).await.expect("delete pdb");
    first.wait_log("evicted pod").await;
    let evicted_before_kill = first.count_log("evicted pod");
    drop(first);

    let second = Reloader::start(&ns.name, &[]).await;
    second.wait_log("restarted every pod of Deployment 'web'").await;
    let after = ready_pods(&ns, "web", 3).await;
    assert!(after.is_disjoint(&original), "every original pod was restarted: {original:?} → {after:?}");
    assert_eq!(evicted_before_kill + second.count_log("evicted pod"), 3, "each pod evicted once");
    assert!(!annotations(&ns, "web").await.contains_key(BOUNDARY), "the boundary is removed when done");
    stop.store(true, Ordering::Relaxed);
    sampler.await.expect("sampler");
    assert!(worst.load(Ordering::Relaxed) <= 1, "{} pods were down at once", worst.load(Ordering::Relaxed));
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    let template = Kind::Deployment.template(&ns, "web").await;
    let env = template.spec.and_then(|s| s.containers[0].env.clone()).unwrap_or_default();
    assert_eq!(env.len(), 1, "the template is never written: {env:?}");
    kubelet.abort();
}

#[tokio::test]
async fn delete_pods_restarts_the_pods_by_deleting_them() {
    let ns = TestNamespace::create("delete-pods").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_deployment(&ns, "web", 2, "delete-pods").await;
    let original = ready_pods(&ns, "web", 2).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("restarted every pod of Deployment 'web'").await;
    assert_eq!(reloader.count_log("deleted pod"), 2);
    // The Reloaded Event says which strategy ran.
    let events = ns.api::<k8s_openapi::api::events::v1::Event>();
    wait_for("a Reloaded Event naming the strategy", RELOAD_WAIT, || async {
        let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let reloaded = list.items.into_iter().filter(|e| e.reason.as_deref() == Some("Reloaded"));
        let notes: Vec<String> = reloaded.filter_map(|e| e.note).collect();
        let named = notes.iter().any(|n| n.ends_with("(rollout strategy: delete-pods)"));
        if named { Ok(()) } else { Err(format!("{notes:?}")) }
    })
    .await;
    assert!(ready_pods(&ns, "web", 2).await.is_disjoint(&original));
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
}

/// `--max-concurrent-rollouts` counts a workload whose pods are restarted until its last one is: with 1, the
/// second workload's restarts begin only after the first's end.
#[tokio::test]
async fn the_restart_budget_holds_a_slot_until_the_last_pod_is_restarted() {
    let ns = TestNamespace::create("evict-budget").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    for name in ["a", "b"] {
        create_deployment(&ns, name, 2, "evict-pods").await;
        ready_pods(&ns, name, 2).await;
    }
    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=1"]).await;
    for name in ["a", "b"] {
        Kind::Deployment.wait_recorded(&ns, name).await;
    }
    let (stop, most) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let sampler = {
        let (stop, most, api) = (stop.clone(), most.clone(), ns.api::<Deployment>());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(list) = api.list(&ListParams::default()).await {
                    let restarting = list
                        .items
                        .iter()
                        .filter(|d| d.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(BOUNDARY)))
                        .count();
                    most.fetch_max(restarting, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    for name in ["a", "b"] {
        reloader.wait_log(&format!("restarted every pod of Deployment '{name}'")).await;
    }
    stop.store(true, Ordering::Relaxed);
    sampler.await.expect("sampler");
    assert_eq!(most.load(Ordering::Relaxed), 1, "one workload's pods restarting at a time");
    assert_eq!(reloader.count_log("evicted pod"), 4);
}

/// A controller that starts after a change restarts only the pods created before the change, as the API server
/// stamped it — not every pod created before the controller started: a replacement created since runs the new
/// content already.
#[tokio::test]
async fn a_controller_started_after_a_change_restarts_only_the_pods_created_before_it() {
    let ns = TestNamespace::create("evict-late").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_deployment(&ns, "web", 2, "evict-pods").await;
    let original = ready_pods(&ns, "web", 2).await;
    let first = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_recorded(&ns, "web").await;
    drop(first);

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let cm = ns.api::<k8s_openapi::api::core::v1::ConfigMap>().get("cfg").await.expect("configmap");
    let fields = cm.metadata.managed_fields.unwrap_or_default();
    let written = fields.iter().filter_map(|f| f.time.as_ref().map(|t| t.0)).max().expect("a managedFields time");
    // A pod created in a later second than the write: it starts with the new content.
    wait_for("the second after the write", RELOAD_WAIT, || async {
        let now = jiff::Timestamp::now().as_second();
        if now > written.as_second() { Ok(()) } else { Err(format!("{now} ≤ {written}")) }
    })
    .await;
    let replaced = original.iter().next().expect("a pod").clone();
    let delete = kube::api::DeleteParams::default();
    ns.api::<Pod>().delete(&replaced, &delete).await.expect("delete a pod");
    let current = wait_for("a replacement, Ready", RELOAD_WAIT, || async {
        let pods = ready_pods(&ns, "web", 2).await;
        if pods.contains(&replaced) { Err(format!("{pods:?}")) } else { Ok(pods) }
    })
    .await;
    let replacement: BTreeSet<String> = current.difference(&original).cloned().collect();
    assert_eq!(replacement.len(), 1, "{original:?} → {current:?}");

    let second = Reloader::start(&ns.name, &[]).await;
    second.wait_log("restarted every pod of Deployment 'web'").await;
    assert_eq!(second.count_log("evicted pod"), 1, "only the pod from before the change");
    let after = ready_pods(&ns, "web", 2).await;
    assert!(after.is_superset(&replacement), "the replacement created after the change runs on: {after:?}");
    assert!(after.is_disjoint(&original), "the pod from before the change was restarted: {after:?}");
}

/// The boundary is removed only while it is the one whose restarts ended: one written since — for a change that
/// came as they ended, not yet in the controller's watch — stays, or that change's pods would never restart (chaos
/// fault 8 met it: the finished step's merge patch removed the boundary written a few milliseconds before).
#[tokio::test]
async fn a_boundary_written_since_is_not_removed_with_the_finished_one() {
    use reloader::workload::{WorkloadKey, WorkloadKind, clear_pod_restart};
    let ns = TestNamespace::create("evict-clear").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_deployment(&ns, "web", 1, "evict-pods").await;
    let newer = Patch::Merge(json!({"metadata": {"annotations": {BOUNDARY: "2026-12-05T10:00:07Z"}}}));
    ns.api::<Deployment>().patch("web", &PatchParams::default(), &newer).await.expect("write a boundary");
    let key = WorkloadKey { kind: WorkloadKind::Deployment, namespace: ns.name.as_str().into(), name: "web".into() };

    let finished = clear_pod_restart(&ns.client, &key, "2026-12-05T10:00:06Z").await.expect("clear");
    assert!(!finished, "another boundary is there");
    assert_eq!(annotations(&ns, "web").await.get(BOUNDARY).map(String::as_str), Some("2026-12-05T10:00:07Z"));
    assert!(clear_pod_restart(&ns.client, &key, "2026-12-05T10:00:07Z").await.expect("clear"));
    assert!(!annotations(&ns, "web").await.contains_key(BOUNDARY), "its own boundary is removed");
    assert!(!clear_pod_restart(&ns.client, &key, "2026-12-05T10:00:07Z").await.expect("clear"), "none left");
}

/// A StatefulSet with `updateStrategy: OnDelete` replaces no pod after a template write (upstream #294):
/// `evict-pods` restarts its pods, the template untouched; the StatefulSet recreates each under its name.
#[tokio::test]
async fn evict_pods_restarts_an_on_delete_statefulset() {
    use k8s_openapi::api::apps::v1::StatefulSet;

    let ns = TestNamespace::create("evict-ondelete").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let annotations =
        json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "evict-pods"});
    Kind::StatefulSet.create(&ns, "db", annotations, json!({}), env_from_configmap("cfg")).await;
    let on_delete = Patch::Merge(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    ns.api::<StatefulSet>().patch("db", &PatchParams::default(), &on_delete).await.expect("OnDelete");
    let before = ready_pods(&ns, "db", 1).await;
    let uid = ns.api::<Pod>().get("db-0").await.expect("db-0").metadata.uid;
    let reloader = Reloader::start(&ns.name, &[]).await;
    Kind::StatefulSet.wait_recorded(&ns, "db").await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    reloader.wait_log("restarted every pod of StatefulSet 'db'").await;
    assert_eq!(reloader.count_log("evicted pod"), 1);
    assert_eq!(ready_pods(&ns, "db", 1).await, before, "recreated under its name");
    let now = ns.api::<Pod>().get("db-0").await.expect("db-0").metadata.uid;
    assert_ne!(now, uid, "db-0 is a new pod");
    Kind::StatefulSet.stays_at_revisions(&ns, "db", 1).await;
}
