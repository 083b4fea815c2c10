//! Fault 7: another writer on the same Deployments, as a GitOps tool or an admission-driven labeller would be.
//!
//! It lists the run's Deployments, waits 100 ms (kube-controller-manager's status updates and the controller's
//! reloads move their `resourceVersion` meanwhile), then replaces each one with a label changed and the listed,
//! possibly stale `resourceVersion` — 409 Conflict whenever someone wrote in between — and merge-patches an
//! annotation on its metadata. Objects go through `DynamicObject` so no field unknown to the client's types is
//! dropped: the pod template is sent back exactly as read, and a replace that succeeds changes only metadata.
//! It runs from the burst's start until the quiet period is over: metadata-only changes must never roll.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams},
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::scenarios::objects::RUN_LABEL;

/// What the writer did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterStats {
    /// Replaces accepted.
    pub replaced: usize,
    /// Replaces refused with 409 Conflict (stale `resourceVersion`).
    pub conflicts: usize,
    /// Metadata merge patches accepted.
    pub patched: usize,
    /// Other failures.
    pub errors: usize,
}

/// The running writer.
pub struct Writer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<WriterStats>,
}

impl Writer {
    /// Starts writing to the Deployments labelled with run `tag` in `namespaces`.
    pub fn start(client: &Client, namespaces: &[String], tag: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let client = client.clone();
        let namespaces = namespaces.to_vec();
        let selector = format!("{RUN_LABEL}={tag}");
        let task = tokio::spawn(async move {
            let mut stats = WriterStats::default();
            let mut n = 0u64;
            let resource =
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "Deployment"), "deployments");
            while !flag.load(Ordering::Relaxed) {
                for ns in &namespaces {
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
                    let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
                        stats.errors += 1;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    for mut obj in list.items {
                        if flag.load(Ordering::Relaxed) {
                            break;
                        }
                        n += 1;
                        write_one(&api, &mut obj, n, &mut stats).await;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            stats
        });
        Self { stop, task }
    }

    /// Stops it and returns what it did.
    pub async fn stop(self) -> WriterStats {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

async fn write_one(api: &Api<DynamicObject>, obj: &mut DynamicObject, n: u64, stats: &mut WriterStats) {
    let name = obj.name_any();
    obj.labels_mut().insert("chaos-writer".into(), n.to_string());
    match api.replace(&name, &PostParams::default(), obj).await {
        Ok(_) => stats.replaced += 1,
        Err(kube::Error::Api(s)) if s.code == 409 => stats.conflicts += 1,
        Err(_) => stats.errors += 1,
    }
    let patch = json!({"metadata": {"annotations": {"chaos.reloader-bench/touched": n.to_string()}}});
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => stats.patched += 1,
        Err(_) => stats.errors += 1,
    }
}
