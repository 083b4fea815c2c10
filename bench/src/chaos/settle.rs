//! After the burst: what each resource ended on, when every workload carried it (convergence), and each
//! workload's history for [`analysis`](super::analysis).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec, Secret};
use kube::{Api, Client, api::DynamicObject};

use super::{
    analysis::{ResourceContents, WorkloadHistory, must_converge},
    controllers::Controllers,
    layout::{ChaosLayout, ChaosWorkload},
    observe::{Tracker, WorkloadKey},
};
use crate::{
    Error,
    measure::content::{hash_data, reload_marks},
    scenarios::{ConfigKind, driver::Driver, objects},
};

/// A workload of the run and when it was created (0: before the controller started).
pub type Created = (ChaosWorkload, Duration);

/// Every content each resource went through (from the driver's record: sequence `n` has a known content) and
/// the content read back now.
pub async fn read_contents(
    client: &Client,
    layout: &ChaosLayout,
    driver: &Driver,
) -> Result<Vec<ResourceContents>, Error> {
    let updates = driver.updates();
    let mut out = Vec::new();
    for (i, def) in layout.configs.iter().enumerate() {
        let ns = &layout.namespaces[def.ns];
        let attempts = updates.iter().filter(|u| u.config == i).count();
        let hashes = (0..=attempts as u64).map(|seq| hash_data(&objects::content(def, ns, seq))).collect();
        let committed =
            updates.iter().filter(|u| u.config == i && u.hash.is_some()).filter_map(|u| u.written).collect();
        let data: BTreeMap<String, String> = match def.kind {
            ConfigKind::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), ns)
                .get(&def.name)
                .await
                .map(|c| c.data.unwrap_or_default())
                .map_err(|e| Error::kube(format!("read ConfigMap {ns}/{}", def.name), e))?,
            ConfigKind::Secret => Api::<Secret>::namespaced(client.clone(), ns)
                .get(&def.name)
                .await
                .map(|s| {
                    let data = s.data.unwrap_or_default().into_iter();
                    data.map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect()
                })
                .map_err(|e| Error::kube(format!("read Secret {ns}/{}", def.name), e))?,
        };
        let mine = updates.iter().filter(|u| u.config == i);
        let commit_rv = std::iter::once(0).chain(mine.map(|u| if u.hash.is_some() { u.order } else { 0 })).collect();
        out.push(ResourceContents { hashes, final_hash: hash_data(&data), committed, commit_rv });
    }
    Ok(out)
}

fn key(layout: &ChaosLayout, w: &ChaosWorkload) -> WorkloadKey {
    (w.kind, layout.namespaces[w.ns].clone(), w.name.clone())
}

/// Waits until every existing workload that must converge carries its resource's final hash (as the runner's
/// watch sees it), supervising the controllers; returns when (offset from `epoch`), `None` on timeout.
pub async fn wait_converged(
    tracker: &Tracker,
    controllers: &mut Controllers,
    layout: &ChaosLayout,
    workloads: &[Created],
    resources: &[ResourceContents],
    epoch: Instant,
    timeout: Duration,
) -> Result<Option<Duration>, Error> {
    let start = Instant::now();
    loop {
        let snapshot = tracker.snapshot();
        let pending = workloads.iter().filter(|(w, since)| {
            let res = &resources[w.resource];
            let Some(seen) = snapshot.get(&key(layout, w)) else { return true };
            !seen.deleted && must_converge(*since, res) && !seen.marks.values().any(|h| *h == res.final_hash)
        });
        if pending.count() == 0 {
            return Ok(Some(epoch.elapsed()));
        }
        if start.elapsed() > timeout {
            return Ok(None);
        }
        controllers.pause(Duration::from_millis(100)).await?;
    }
}

/// Each workload's writes (from the watch) and its reload marks read back from the API server now.
pub async fn histories(
    client: &Client,
    tracker: &Tracker,
    layout: &ChaosLayout,
    workloads: &[Created],
) -> Result<Vec<WorkloadHistory>, Error> {
    let mut out = Vec::new();
    for (w, since) in workloads {
        let ns = &layout.namespaces[w.ns];
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &w.kind.api_resource());
        let obj =
            api.get_opt(&w.name).await.map_err(|e| Error::kube(format!("read {:?} {ns}/{}", w.kind, w.name), e))?;
        let final_marks = obj.map(|o| {
            let template = o.data.pointer("/spec/template").cloned().unwrap_or_default();
            serde_json::from_value::<PodTemplateSpec>(template).map(|t| reload_marks(&t)).unwrap_or_default()
        });
        let seen = tracker.get(&key(layout, w)).unwrap_or_default();
        out.push(WorkloadHistory {
            label: format!("{:?} {ns}/{}", w.kind, w.name),
            resource: w.resource,
            since: *since,
            writes: seen.writes,
            final_marks,
        });
    }
    Ok(out)
}
