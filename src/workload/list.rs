//! One LIST of a workload kind in a namespace, summarised: upstream's way of finding workloads (v1 lists every
//! kind in the changed resource's namespace on each change), used here only for kinds the controller may list
//! but not watch (upstream v1's RBAC has no `watch` on workloads).

use futures::future::BoxFuture;
use kube::{Api, Client, api::ListParams};

use super::{
    Lean, WorkloadKey, WorkloadKind, WorkloadObject, WorkloadSummary,
    kinds::{self, KindVisitor},
    summarise,
};
use crate::rules::annotations::AnnotationKeys;

/// Every workload of `kind` in `namespace` (`None`: in every namespace), summarised.
pub async fn list_summaries(
    client: &Client,
    kind: WorkloadKind,
    namespace: Option<&str>,
    keys: &AnnotationKeys,
) -> Result<Vec<(WorkloadKey, WorkloadSummary)>, kube::Error> {
    kinds::visit(kind, List { client, namespace, keys }).await
}

/// [`list_summaries`] for one kind's type.
struct List<'a> {
    client: &'a Client,
    namespace: Option<&'a str>,
    keys: &'a AnnotationKeys,
}

impl<'a> KindVisitor for List<'a> {
    type Output = BoxFuture<'a, Result<Vec<(WorkloadKey, WorkloadSummary)>, kube::Error>>;

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        let Self { client, namespace, keys } = self;
        Box::pin(async move {
            let api = match namespace {
                Some(namespace) => Api::<Lean<K>>::namespaced(client.clone(), namespace),
                None => Api::<Lean<K>>::all(client.clone()),
            };
            let items = api.list(&ListParams::default()).await?.items;
            Ok(items.iter().filter_map(|o| summarise(&o.0, keys)).collect())
        })
    }
}
