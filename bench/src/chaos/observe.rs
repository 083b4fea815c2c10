//! The runner's own record of every pod-template write on the run's workloads, from its watches.
//!
//! A write is any change of `spec.template` (not only of the reload marks: a template rewritten with the same
//! hash, e.g. a new `observedAt`, is a rollout too). `metadata.generation` cannot count them: Deployments bump
//! it for annotation changes as well. A watch delivers every change of an object in order, except across a
//! relist (after 410 Gone or a broken watch): a change first seen in a relist is recorded as a *blind* write,
//! which may stand for several. The fault scripts keep the controller from writing while the runner's watches
//! are down (fault 3 stops it until they have relisted), so blind writes stay at 0 and every write is classified.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind},
    runtime::{WatchStreamExt, utils::Backoff, watcher},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    measure::content::{changed_marks, reload_marks},
    scenarios::objects::RUN_LABEL,
};

/// The controller's restart-safety record on a workload's metadata (written once on first sight, and with
/// every reload): its presence tells that the controller has seen the workload.
pub const APPLIED_HASHES: &str = "reloader.stakater.com/applied-hashes";

/// Workload kinds a chaos run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// argoproj.io/v1alpha1 Rollout (fault 4).
    Rollout,
    /// apps.kruise.io/v1alpha1 CloneSet, reloaded through `--workload-kind=kruise-cloneset` (fault 8).
    CloneSet,
    /// apps/v1 DaemonSet: fault 9's `delete-pods` one (judged by its pods, not its template).
    DaemonSet,
}

impl WorkloadKind {
    /// Its API resource.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Self::Deployment => {
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "Deployment"), "deployments")
            }
            Self::Rollout => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Rollout"),
                "rollouts",
            ),
            Self::CloneSet => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "CloneSet"),
                "clonesets",
            ),
            Self::DaemonSet => {
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "DaemonSet"), "daemonsets")
            }
        }
    }
}

/// A workload: kind, namespace, name.
pub type WorkloadKey = (WorkloadKind, String, String);

/// One pod-template write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TemplateWrite {
    /// When the watch delivered it (since the run's start).
    pub at: Duration,
    /// Reload marks (`<container>/<env var>` or the annotation key) whose value it changed, with the new value.
    pub changed: Vec<(String, String)>,
    /// First seen in a relist: it happened while the watch was down and may stand for several writes.
    pub blind: bool,
}

/// What is known about one workload.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Its template as last seen.
    template: Value,
    /// Its reload marks as last seen.
    pub marks: BTreeMap<String, String>,
    /// Every template write after the first sight.
    pub writes: Vec<TemplateWrite>,
    /// The controller has seen it: it wrote its `applied-hashes` record (on first sight, metadata only).
    pub recorded: bool,
    /// Deleted (Rollouts go with their CRD).
    pub deleted: bool,
}

#[derive(Default)]
struct State {
    workloads: HashMap<WorkloadKey, Observed>,
    /// Completed lists per watch (the first one and every relist).
    lists: Vec<usize>,
}

/// The running watches; they stop when it is dropped.
pub struct Tracker {
    state: Arc<Mutex<State>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Retries a failed watch every 500 ms: a relist must follow a fault quickly (the default backoff grows to 30 s).
struct Steady;

impl Iterator for Steady {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(500))
    }
}

impl Backoff for Steady {
    fn reset(&mut self) {}
}

impl Tracker {
    /// Watches `kinds` labelled with run `tag` in all namespaces; times are offsets from `epoch`.
    pub fn start(client: &Client, tag: &str, kinds: &[WorkloadKind], epoch: Instant) -> Self {
        let state = Arc::new(Mutex::new(State { lists: vec![0; kinds.len()], ..State::default() }));
        let selector = format!("{RUN_LABEL}={tag}");
        let tasks = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| tokio::spawn(watch(client.clone(), *kind, i, selector.clone(), state.clone(), epoch)))
            .collect();
        Self { state, tasks }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Lists completed by each watch so far (1 after the first sync; more after relists).
    pub fn lists(&self) -> Vec<usize> {
        self.with(|s| s.lists.clone())
    }

    /// Waits until every watch has completed more lists than `before` (its first sync: all zeros).
    pub async fn wait_lists_after(&self, before: &[usize], timeout: Duration) -> Result<(), crate::Error> {
        let start = Instant::now();
        while !self.lists().iter().zip(before).all(|(now, then)| now > then) {
            if start.elapsed() > timeout {
                return Err(crate::Error::Timeout("the runner's workload watches to list".into()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// A copy of what is known about every workload.
    pub fn snapshot(&self) -> HashMap<WorkloadKey, Observed> {
        self.with(|s| s.workloads.clone())
    }

    /// What is known about one workload.
    pub fn get(&self, key: &WorkloadKey) -> Option<Observed> {
        self.with(|s| s.workloads.get(key).cloned())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn watch(
    client: Client,
    kind: WorkloadKind,
    id: usize,
    selector: String,
    state: Arc<Mutex<State>>,
    epoch: Instant,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &kind.api_resource());
    let mut stream = watcher(api, watcher::Config::default().labels(&selector)).backoff(Steady).boxed();
    // Keys seen in the list in progress: the others are gone once it completes.
    let mut listing: Option<HashSet<WorkloadKey>> = None;
    let mut synced = false;
    while let Some(event) = stream.next().await {
        let at = epoch.elapsed();
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(obj)) => {
                let key = key(kind, &obj);
                if let Some(l) = listing.as_mut() {
                    l.insert(key.clone());
                }
                apply(&mut st, key, &obj, at, synced);
            }
            Ok(watcher::Event::Apply(obj)) => apply(&mut st, key(kind, &obj), &obj, at, false),
            Ok(watcher::Event::Delete(obj)) => {
                if let Some(w) = st.workloads.get_mut(&key(kind, &obj)) {
                    w.deleted = true;
                }
            }
            Ok(watcher::Event::InitDone) => {
                let listed = listing.take().unwrap_or_default();
                for (k, w) in st.workloads.iter_mut() {
                    if k.0 == kind && !listed.contains(k) {
                        w.deleted = true;
                    }
                }
                if let Some(n) = st.lists.get_mut(id) {
                    *n += 1;
                }
                synced = true;
            }
            // A CRD being deleted or re-created answers 404 for a while; the watch retries every 500 ms.
            Err(e) => tracing::debug!(?kind, "chaos watch error: {e}"),
        }
    }
}

fn key(kind: WorkloadKind, obj: &DynamicObject) -> WorkloadKey {
    (kind, obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Records one version of a workload; `relisted`: it comes from a relist after the first sync.
fn apply(st: &mut State, key: WorkloadKey, obj: &DynamicObject, at: Duration, relisted: bool) {
    let template = obj.data.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    let marks =
        serde_json::from_value::<PodTemplateSpec>(template.clone()).map(|t| reload_marks(&t)).unwrap_or_default();
    let recorded = obj.annotations().contains_key(APPLIED_HASHES);
    let entry = st.workloads.entry(key);
    let w = match entry {
        std::collections::hash_map::Entry::Vacant(v) => {
            // First sight (or a new object under the same name): the baseline.
            v.insert(Observed { template, marks, writes: Vec::new(), recorded, deleted: false });
            return;
        }
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
    };
    w.recorded |= recorded;
    w.deleted = false;
    if w.template != template {
        let changed = changed_marks(&w.marks, &marks);
        w.writes.push(TemplateWrite { at, changed, blind: relisted });
        w.template = template;
        w.marks = marks;
    }
}
