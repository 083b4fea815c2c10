//! The `evict-pods` and `delete-pods` rollout strategies on the real control plane (issue 29): the template is never
//! written (an operator that owns it would revert it); the pods created before the change are restarted one at a
//! time — through the Eviction API, so a PodDisruptionBudget holds them back — and a controller killed mid-way is
//! followed by one that finishes from what the cluster shows.

mod common;

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::*;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::{Pod, ResourceQuota},
    events::v1::Event,
    policy::v1::PodDisruptionBudget,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const BOUNDARY: &str = "reloader.stakater.com/restart-pods-created-before";
const APPLIED: &str = "reloader.stakater.com/applied-hashes";

async fn create_deployment(ns: &TestNamespace, name: &str, replicas: i32, strategy: &str) {
    create_deployment_with(ns, name, replicas, strategy, json!({}), json!([])).await;
}

/// testenv's KWOK holds a pod with this label (empty) and a `STAKATER_*` variable not Ready (testenv/build.sh);
/// removing the label lets it become Ready.
const HELD: &str = "testenv.reloader.dev/unready-when-reloaded";

/// A Deployment whose pods KWOK makes Ready only once a test's "kubelet" lets each one ([`slow_kubelet`]).
async fn create_slow_deployment(ns: &TestNamespace, name: &str, replicas: i32, strategy: &str) {
    let env = json!([{"name": "STAKATER_TEST_HOLD", "value": "1"}]);
    create_deployment_with(ns, name, replicas, strategy, json!({ HELD: "" }), env).await;
}

/// Lets each pod of `app` become Ready once it has existed for `delay`: replacements take that long, so a
/// controller that restarted the next pod before the last one's replacement is Ready would have two down.
fn slow_kubelet(ns: &TestNamespace, app: &str, delay: Duration) -> tokio::task::JoinHandle<()> {
    let (pods, selector) = (ns.api::<Pod>(), format!("app={app},{HELD}"));
    tokio::spawn(async move {
        loop {
            let now = jiff::Timestamp::now();
            for pod in pods.list(&ListParams::default().labels(&selector)).await.map(|l| l.items).unwrap_or_default() {
                let created = pod.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
                let age = now.duration_since(created);
                if age >= jiff::SignedDuration::try_from(delay).unwrap_or_default() {
                    let name = pod.metadata.name.unwrap_or_default();
                    let release = Patch::Merge(json!({"metadata": {"labels": { HELD: null }}}));
                    let _ = pods.patch(&name, &PatchParams::default(), &release).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

async fn create_deployment_with(
    ns: &TestNamespace,
    name: &str,
    replicas: i32,
    strategy: &str,
    labels: serde_json::Value,
    env: serde_json::Value,
) {
    let mut pod_labels = json!({"app": name});
    pod_labels.as_object_mut().expect("labels").extend(labels.as_object().cloned().unwrap_or_default());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": strategy}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": pod_labels}, "spec": {"containers": [{"name": "app", "image": "x",
                "env": env, "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment");
    ns.api::<Deployment>().create(&PostParams::default(), &d).await.expect("create deployment");
}

/// Names of the workload's live (not terminating) pods, once `n` of them are Ready.
async fn ready_pods(ns: &TestNamespace, app: &str, n: usize) -> BTreeSet<String> {
    selected_ready(ns, &format!("app={app}"), n).await
}

/// Names of the pods `selector` finds, once there are `n` and every one is Ready.
async fn selected_ready(ns: &TestNamespace, selector: &str, n: usize) -> BTreeSet<String> {
    wait_for(&format!("{n} Ready pods of {selector}"), RELOAD_WAIT, || async {
        let pods = ns.api::<Pod>().list(&ListParams::default().labels(selector)).await;
        let pods = pods.map_err(|e| e.to_string())?.items;
        let ready: BTreeSet<String> =
            pods.iter().filter(|p| is_ready(p)).filter_map(|p| p.metadata.name.clone()).collect();
        if ready.len() == n && pods.len() == n {
            Ok(ready)
        } else {
            Err(format!("{} pods, {} ready", pods.len(), ready.len()))
        }
    })
    .await
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn annotations(ns: &TestNamespace, name: &str) -> std::collections::BTreeMap<String, String> {
    ns.api::<Deployment>().get(name).await.expect("deployment").metadata.annotations.unwrap_or_default()
}

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

/// A Deployment beside `web` whose pods carry `app=web` too (`track=<track>`): `web`'s selector finds them.
async fn create_neighbour(ns: &TestNamespace, name: &str, track: &str, schedulable: bool) {
    let labels = json!({"app": "web", "track": track});
    let node_selector = if schedulable { json!({}) } else { json!({"no-such-label": "on-any-node"}) };
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"nodeSelector": node_selector,
                "containers": [{"name": "app", "image": "x"}]}}}
    }))
    .expect("deployment");
    ns.api::<Deployment>().create(&PostParams::default(), &d).await.expect("create neighbour");
}

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
