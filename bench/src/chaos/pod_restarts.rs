//! Faults 8 and 9's pod-restarting workloads: `evict-pods` Deployments (and fault 9's `delete-pods` DaemonSet)
//! whose reloads restart their pods instead of writing the template.
//! Their rollouts are pod evictions, seen from the runner's own watch of their pods, and judged by the same rule as
//! the controller's (`reloader::rules::pod_restarts`), in whole seconds as pods record creation:
//!
//! - an eviction is **justified** when a content of the workload's resource was acknowledged in or after the
//!   second the pod was created (it may run older content: the controller's boundary is the second after the
//!   API server stamped the write, which the runner's acknowledgement follows) and before the eviction was seen;
//!   otherwise it is a **duplicate**, or **spurious** once the workload had converged;
//! - a workload is **missed** when, at the end, a pod of it was created more than a second before the final
//!   content was acknowledged, or it has fewer pods than it wants;
//! - at no moment may more than one of a workload's pods be down (missing, terminating or not Ready), once it had
//!   them all Ready: each watch event is a sample.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::Pod,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;

use super::{
    analysis::{Figures, ResourceContents},
    layout::{ChaosLayout, ChaosWorkload},
    observe::{APPLIED_HASHES, WorkloadKind},
};
use crate::{Error, scenarios::objects};

/// The boundary annotation the controller writes while pods are still to restart.
const BOUNDARY: &str = "reloader.stakater.com/restart-pods-created-before";
/// Replicas of each `evict-pods` Deployment: two, so one-at-a-time is exercised (the DaemonSet's on the two KWOK
/// nodes too).
pub const REPLICAS: usize = 2;

/// One pod as the runner's watch saw it.
#[derive(Clone, Debug)]
struct SeenPod {
    workload: String,
    created: jiff::Timestamp,
    /// When a deletion (eviction) was first seen.
    deleted: Option<jiff::Timestamp>,
    /// Its `Ready` condition is `True` (as last seen).
    ready: bool,
}

#[derive(Default)]
struct Seen {
    pods: BTreeMap<String, SeenPod>,
    /// Per workload, once all its pods were Ready: the most of them down at once since.
    worst_down: BTreeMap<String, usize>,
}

impl Seen {
    fn sample(&mut self, workload: &str) {
        let up = self.pods.values().filter(|p| p.workload == workload && p.deleted.is_none() && p.ready).count();
        let down = REPLICAS.saturating_sub(up);
        match self.worst_down.get_mut(workload) {
            Some(worst) => *worst = (*worst).max(down),
            None if down == 0 => {
                self.worst_down.insert(workload.to_owned(), 0);
            }
            None => {}
        }
    }
}

/// The runner's watch of the pod-restarting workloads' pods.
pub struct PodWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodWatch {
    /// Watches the pods of the run (`app` labels of `workloads`) in `namespace`.
    pub fn start(client: &Client, namespace: &str, workloads: &[ChaosWorkload]) -> Self {
        let names: Vec<String> = workloads.iter().map(|w| w.name.clone()).collect();
        let selector = format!("app in ({})", names.join(","));
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default().labels(&selector)).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let (pod, gone) = match event {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                    Ok(watcher::Event::Delete(p)) => (p, true),
                    _ => continue,
                };
                let now = jiff::Timestamp::now();
                let mut seen = shared.lock().unwrap_or_else(PoisonError::into_inner);
                let workload = pod.labels().get("app").cloned().unwrap_or_default();
                let entry = seen.pods.entry(pod.name_any()).or_insert_with(|| SeenPod {
                    workload: workload.clone(),
                    created: pod.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0),
                    deleted: None,
                    ready: false,
                });
                if (gone || pod.metadata.deletion_timestamp.is_some()) && entry.deleted.is_none() {
                    entry.deleted = Some(now);
                }
                let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
                entry.ready = conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
                seen.sample(&workload);
            }
        });
        Self { seen, task }
    }

    fn snapshot(&self) -> Vec<SeenPod> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).pods.values().cloned().collect()
    }

    /// Workloads that had more than one pod down at once, with how many.
    pub fn too_many_down(&self) -> Vec<(String, usize)> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.worst_down.iter().filter(|(_, n)| **n > 1).map(|(w, n)| (w.clone(), *n)).collect()
    }

    /// Stops watching.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// Creates a pod-restarting workload: an `evict-pods` Deployment ([`REPLICAS`] replicas), or a `delete-pods`
/// DaemonSet (one pod per KWOK node); auto-annotated, with the bench's pod spec.
pub async fn create(client: &Client, layout: &ChaosLayout, w: &ChaosWorkload, tag: &str) -> Result<(), Error> {
    let ns = &layout.namespaces[w.ns];
    let labels = json!({"app": w.name});
    let c = &layout.configs[w.resource];
    let refs = [(c.kind, c.name.clone(), w.how)];
    let daemon_set = w.kind == WorkloadKind::DaemonSet;
    let strategy = if daemon_set { "delete-pods" } else { "evict-pods" };
    let metadata = json!({"name": w.name, "labels": {objects::RUN_LABEL: tag},
                          "annotations": {objects::AUTO: "true", "reloader.stakater.com/rollout-strategy": strategy}});
    let mut spec = json!({"selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels}, "spec": objects::pod_spec(&refs)}});
    let what = format!("create {:?} {ns}/{}", w.kind, w.name);
    let pp = PostParams::default();
    if daemon_set {
        let d: DaemonSet = serde_json::from_value(json!({"metadata": metadata, "spec": spec}))?;
        Api::<DaemonSet>::namespaced(client.clone(), ns)
            .create(&pp, &d)
            .await
            .map(|_| ())
            .map_err(|e| Error::kube(what, e))
    } else {
        spec["replicas"] = json!(REPLICAS);
        let d: Deployment = serde_json::from_value(json!({"metadata": metadata, "spec": spec}))?;
        Api::<Deployment>::namespaced(client.clone(), ns)
            .create(&pp, &d)
            .await
            .map(|_| ())
            .map_err(|e| Error::kube(what, e))
    }
}

/// The wall time of each acknowledged content of `resource`.
fn acknowledged(resource: &ResourceContents, epoch_wall: jiff::Timestamp) -> Vec<jiff::Timestamp> {
    let at = |d: &Duration| epoch_wall.checked_add(jiff::SignedDuration::try_from(*d).unwrap_or_default());
    resource.committed.iter().filter_map(|d| at(d).ok()).collect()
}

/// Whether `workload`'s `applied-hashes` record holds `hash` (a ConfigMap's record is its plain SHA-1; a Secret's
/// is sealed, so any record counts for those).
fn records(workload: &DynamicObject, hash: &str) -> bool {
    let Some(record) = workload.annotations().get(APPLIED_HASHES) else { return false };
    let values: BTreeMap<String, String> = serde_json::from_str(record).unwrap_or_default();
    values.iter().any(|(resource, value)| value == hash || resource.starts_with("secret/"))
}

/// Pods of `w` left to restart or missing, for its resource's final content.
fn pending(pods: &[SeenPod], w: &ChaosWorkload, last: Option<jiff::Timestamp>) -> Option<String> {
    let live: Vec<&SeenPod> = pods.iter().filter(|p| p.workload == w.name && p.deleted.is_none()).collect();
    let old = live.iter().filter(|p| last.is_some_and(|t| p.created.as_second() + 1 < t.as_second())).count();
    if live.len() < REPLICAS || old > 0 {
        return Some(format!(
            "{:?} {}: {} pods, {old} older than its resource's last change",
            w.kind,
            w.name,
            live.len()
        ));
    }
    None
}

/// Waits until every `evict-pods` workload runs only pods of its resource's final content and has no boundary
/// left; returns when (since `epoch`), `None` on timeout.
pub async fn wait_restarted(
    client: &Client,
    watch: &PodWatch,
    layout: &ChaosLayout,
    workloads: &[ChaosWorkload],
    resources: &[ResourceContents],
    (epoch, epoch_wall): (Instant, jiff::Timestamp),
    timeout: Duration,
) -> Option<Duration> {
    let start = Instant::now();
    loop {
        let pods = watch.snapshot();
        let mut done = true;
        for w in workloads {
            let last = acknowledged(&resources[w.resource], epoch_wall).last().copied();
            let api =
                Api::<DynamicObject>::namespaced_with(client.clone(), &layout.namespaces[w.ns], &w.kind.api_resource());
            let object = api.get(&w.name).await.ok();
            let boundary = object.as_ref().is_some_and(|d| d.annotations().contains_key(BOUNDARY));
            // The controller has acted on the final content: pods of the second before the last change may be
            // older than it (the controller restarts them; `pending` cannot tell them from newer ones).
            let acted = object.as_ref().is_some_and(|d| records(d, &resources[w.resource].final_hash));
            done &= acted && !boundary && pending(&pods, w, last).is_none();
        }
        if done {
            return Some(epoch.elapsed());
        }
        if start.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Adds the pod restarts to `figures`: each eviction a rollout, classified; each workload converged or missed.
pub fn analyze(
    figures: &mut Figures,
    watch: &PodWatch,
    workloads: &[ChaosWorkload],
    resources: &[ResourceContents],
    epoch_wall: jiff::Timestamp,
    restarted_at: Option<Duration>,
) {
    judge(figures, &watch.snapshot(), workloads, resources, epoch_wall, restarted_at);
}

fn judge(
    figures: &mut Figures,
    pods: &[SeenPod],
    workloads: &[ChaosWorkload],
    resources: &[ResourceContents],
    epoch_wall: jiff::Timestamp,
    restarted_at: Option<Duration>,
) {
    let converged_wall =
        restarted_at.and_then(|d| epoch_wall.checked_add(jiff::SignedDuration::try_from(d).ok()?).ok());
    figures.converged &= restarted_at.is_some();
    for w in workloads {
        let acks = acknowledged(&resources[w.resource], epoch_wall);
        figures.expected += acks.len();
        if !acks.is_empty() {
            figures.must_converge += 1;
        }
        if let Some(why) = pending(pods, w, acks.last().copied()) {
            figures.missed += 1;
            figures.problems.push(format!("missed: {why}"));
        }
        for p in pods.iter().filter(|p| p.workload == w.name) {
            let Some(deleted) = p.deleted else { continue };
            figures.rollouts += 1;
            let justified = acks.iter().any(|a| a.as_second() >= p.created.as_second() && *a <= deleted);
            if converged_wall.is_some_and(|c| deleted > c) {
                figures.spurious += 1;
                figures.problems.push(format!("spurious: {:?} {}: a pod restarted after convergence", w.kind, w.name));
            } else if !justified {
                figures.duplicates += 1;
                figures.problems.push(format!(
                    "duplicate: {:?} {}: a pod created at {} restarted at {deleted} with no change since",
                    w.kind, w.name, p.created
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::RefHow;

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().expect("time")
    }

    fn pod(created: &str, deleted: Option<&str>) -> SeenPod {
        SeenPod { workload: "web".into(), created: at(created), deleted: deleted.map(at), ready: true }
    }

    /// One content acknowledged at 10:00:05.5: evicting pods from before it is justified, evicting a pod created
    /// after it is a duplicate, an eviction after convergence spurious, and a pod from before it left running missed.
    #[test]
    fn evictions_are_judged_by_the_controllers_rule_in_whole_seconds() {
        let epoch = at("2026-12-05T10:00:00Z");
        let resource = ResourceContents { committed: vec![Duration::from_millis(5500)], ..Default::default() };
        let w = ChaosWorkload {
            kind: super::super::observe::WorkloadKind::Deployment,
            ns: 0,
            name: "web".into(),
            resource: 0,
            how: RefHow::EnvFrom,
        };
        let judged = |pods: &[SeenPod], converged: Option<Duration>| {
            let mut f = Figures { converged: true, ..Figures::default() };
            judge(&mut f, pods, std::slice::from_ref(&w), std::slice::from_ref(&resource), epoch, converged);
            (f.rollouts, f.duplicates, f.spurious, f.missed)
        };
        let replaced = [
            pod("2026-12-05T09:00:00Z", Some("2026-12-05T10:00:06Z")),
            pod("2026-12-05T10:00:05Z", Some("2026-12-05T10:00:07Z")), // its second: restarted once more, justified
            pod("2026-12-05T10:00:07Z", None),
            pod("2026-12-05T10:00:08Z", None),
        ];
        assert_eq!(judged(&replaced, Some(Duration::from_secs(9))), (2, 0, 0, 0));
        let mut again = replaced.to_vec();
        again[3].deleted = Some(at("2026-12-05T10:00:08.5Z"));
        again.push(pod("2026-12-05T10:00:09Z", None));
        assert_eq!(judged(&again, Some(Duration::from_secs(20))), (3, 1, 0, 0), "no change since it was created");
        assert_eq!(judged(&again, Some(Duration::from_secs(8))), (3, 0, 1, 0), "after convergence");
        let left = [pod("2026-12-05T09:00:00Z", None), pod("2026-12-05T10:00:07Z", None)];
        assert_eq!(judged(&left, None), (0, 0, 0, 1), "a pod from before the change still runs");
    }
}
