//! Watches the scenario's workloads and records every reload-mark change with the time the watch delivered it.
//!
//! This is the bench's view of a reload: the pod-template change a user would see, whatever controller made
//! it. A workload's first appearance is its baseline; later events are diffed against the previous marks.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Debug,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    core::v1::PodTemplateSpec,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::content::{changed_marks, reload_marks};

/// Workload kinds the scenarios use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

/// A workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadId {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// One reload-mark change.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The workload.
    pub workload: WorkloadId,
    /// The mark (`<container>/<env var>` or the annotation key).
    pub key: String,
    /// The new value (a content hash).
    pub hash: String,
    /// When the watch delivered it.
    pub at: Instant,
    /// Id of the watch event (one per workload write).
    pub write: u64,
}

#[derive(Default)]
struct State {
    marks: HashMap<WorkloadId, BTreeMap<String, String>>,
    paused: HashMap<WorkloadId, bool>,
    pause_cycles: usize,
    seen: Vec<Seen>,
    synced_streams: usize,
    next_write: u64,
}

/// A running tracker; its watches stop when it is dropped.
pub struct Tracker {
    state: Arc<Mutex<State>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tracker {
    /// Starts watching Deployments, StatefulSets and DaemonSets matching `labels` in all namespaces.
    pub fn start(client: &Client, labels: &str) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let tasks = vec![
            spawn_watch::<Deployment>(client, labels, Kind::Deployment, state.clone(), |d| {
                (d.spec.as_ref().map(|s| &s.template), d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false))
            }),
            spawn_watch::<StatefulSet>(client, labels, Kind::StatefulSet, state.clone(), |s| {
                (s.spec.as_ref().map(|s| &s.template), false)
            }),
            spawn_watch::<DaemonSet>(client, labels, Kind::DaemonSet, state.clone(), |s| {
                (s.spec.as_ref().map(|s| &s.template), false)
            }),
        ];
        Self { state, tasks }
    }

    fn with<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits until every watch has listed once.
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), crate::Error> {
        let start = Instant::now();
        while self.with(|s| s.synced_streams) < self.tasks.len() {
            if start.elapsed() > timeout {
                return Err(crate::Error::Timeout("the bench's workload watches to sync".into()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Number of workloads currently known.
    pub fn known(&self) -> usize {
        self.with(|s| s.marks.len())
    }

    /// Every mark change so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.with(|s| s.seen.clone())
    }

    /// Mark changes of one workload so far.
    pub fn seen_on(&self, namespace: &str, name: &str) -> Vec<Seen> {
        self.with(|s| {
            s.seen.iter().filter(|o| o.workload.namespace == namespace && o.workload.name == name).cloned().collect()
        })
    }

    /// Number of times a Deployment went from running to paused.
    pub fn pause_cycles(&self) -> usize {
        self.with(|s| s.pause_cycles)
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

type Extract<K> = fn(&K) -> (Option<&PodTemplateSpec>, bool);

fn spawn_watch<K>(
    client: &Client,
    labels: &str,
    kind: Kind,
    state: Arc<Mutex<State>>,
    extract: Extract<K>,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let config = watcher::Config::default().labels(labels);
    tokio::spawn(async move {
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut listed_once = false;
        while let Some(event) = stream.next().await {
            let at = Instant::now();
            let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
            match event {
                Ok(watcher::Event::InitApply(obj) | watcher::Event::Apply(obj)) => {
                    let id = WorkloadId { kind, namespace: obj.namespace().unwrap_or_default(), name: obj.name_any() };
                    let (template, paused) = extract(&obj);
                    let marks = template.map(reload_marks).unwrap_or_default();
                    record(&mut st, id, marks, paused, at);
                }
                Ok(watcher::Event::Delete(obj)) => {
                    let id = WorkloadId { kind, namespace: obj.namespace().unwrap_or_default(), name: obj.name_any() };
                    st.marks.remove(&id);
                    st.paused.remove(&id);
                }
                Ok(watcher::Event::InitDone) if !listed_once => {
                    listed_once = true;
                    st.synced_streams += 1;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(?kind, "bench watch error: {e}"),
            }
        }
    })
}

fn record(st: &mut State, id: WorkloadId, marks: BTreeMap<String, String>, paused: bool, at: Instant) {
    if st.paused.insert(id.clone(), paused) == Some(false) && paused {
        st.pause_cycles += 1;
    }
    let Some(before) = st.marks.get(&id) else {
        // First sight: the baseline (a workload is created without reload marks).
        st.marks.insert(id, marks);
        return;
    };
    let changed = changed_marks(before, &marks);
    if !changed.is_empty() {
        st.next_write += 1;
        let write = st.next_write;
        for (key, hash) in changed {
            st.seen.push(Seen { workload: id.clone(), key, hash, at, write });
        }
    }
    st.marks.insert(id, marks);
}
