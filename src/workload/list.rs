//! One LIST of a workload kind in a namespace, summarised: upstream's way of finding workloads (v1 lists every
//! kind in the changed resource's namespace on each change), used here only for kinds the controller may list
//! but not watch (upstream v1's RBAC has no `watch` on workloads).

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    batch::v1::{CronJob, Job},
};
use kube::{Api, Client, api::ListParams};

use super::{Lean, WorkloadKey, WorkloadKind, WorkloadObject, WorkloadSummary, custom, summarise};
use crate::annotations::AnnotationKeys;

/// Every workload of `kind` in `namespace`, summarised.
pub async fn list_summaries(
    client: &Client,
    kind: WorkloadKind,
    namespace: &str,
    keys: &AnnotationKeys,
) -> Result<Vec<(WorkloadKey, WorkloadSummary)>, kube::Error> {
    match kind {
        WorkloadKind::Deployment => list::<Deployment>(client, namespace, keys).await,
        WorkloadKind::StatefulSet => list::<StatefulSet>(client, namespace, keys).await,
        WorkloadKind::DaemonSet => list::<DaemonSet>(client, namespace, keys).await,
        WorkloadKind::CronJob => list::<CronJob>(client, namespace, keys).await,
        WorkloadKind::Job => list::<Job>(client, namespace, keys).await,
        WorkloadKind::Rollout => list::<custom::Rollout>(client, namespace, keys).await,
        WorkloadKind::DeploymentConfig => list::<custom::DeploymentConfig>(client, namespace, keys).await,
    }
}

async fn list<K: WorkloadObject>(
    client: &Client,
    namespace: &str,
    keys: &AnnotationKeys,
) -> Result<Vec<(WorkloadKey, WorkloadSummary)>, kube::Error> {
    let items = Api::<Lean<K>>::namespaced(client.clone(), namespace).list(&ListParams::default()).await?.items;
    Ok(items.iter().filter_map(|o| summarise(&o.0, keys)).collect())
}
