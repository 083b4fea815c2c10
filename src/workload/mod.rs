//! The workload kinds that get reloaded. Each kind lives in its own file and implements [`WorkloadObject`];
//! adding a kind means one file plus a line in [`WorkloadKind`] and the dispatch in [`patch_template`].

mod daemonset;
mod deployment;
mod statefulset;

use std::{fmt, sync::Arc};

use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        core::v1::PodTemplateSpec,
    },
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{
    annotations::{AnnotationKeys, WorkloadAnnotations},
    constants::FIELD_MANAGER,
    hash::ContentHash,
    references::{ConfigUse, config_uses},
    resource::ConfigKind,
    strategy::parse_last_reloaded_from,
};

/// Kinds of workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Identity of a workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    /// Kind.
    pub kind: WorkloadKind,
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// A typed workload object the controller watches.
pub trait WorkloadObject:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Its kind.
    const KIND: WorkloadKind;
    /// Its pod template.
    fn pod_template(&self) -> Option<&PodTemplateSpec>;
}

/// What the index remembers about a workload: no pod spec, only what decisions and idempotence need.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSummary {
    /// Object UID (a recreated workload is a new one).
    pub uid: String,
    /// Selecting annotations.
    pub annotations: WorkloadAnnotations,
    /// Resources the pod spec uses.
    pub uses: Vec<ConfigUse>,
    /// First container name.
    pub first_container: Option<String>,
    /// `STAKATER_*` env vars found on the template: (container, env name, hash).
    pub env_records: Vec<(String, String, ContentHash)>,
    /// The `last-reloaded-from` record, if any.
    pub annotation_record: Option<(ConfigKind, String, ContentHash)>,
}

/// Summarises a workload object for the index.
pub fn summarise<K: WorkloadObject>(obj: &K, keys: &AnnotationKeys) -> Option<(WorkloadKey, WorkloadSummary)> {
    let namespace = obj.namespace()?;
    let template = obj.pod_template();
    let spec = template.and_then(|t| t.spec.as_ref());
    let template_annotations = template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.as_ref());
    let env_records = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| {
            c.env.iter().flatten().filter_map(move |e| {
                let value = e.value.as_deref()?;
                if !e.name.starts_with(crate::constants::ENV_VAR_PREFIX) {
                    return None;
                }
                Some((c.name.clone(), e.name.clone(), ContentHash::parse_hex(value)?))
            })
        })
        .collect();
    let annotation_record = template_annotations
        .and_then(|a| a.get(crate::constants::annotation::LAST_RELOADED_FROM))
        .and_then(|v| parse_last_reloaded_from(v));
    let summary = WorkloadSummary {
        uid: obj.meta().uid.clone().unwrap_or_default(),
        annotations: WorkloadAnnotations::extract(keys, obj.meta().annotations.as_ref(), template_annotations),
        uses: spec.map(config_uses).unwrap_or_default(),
        first_container: spec.and_then(|s| s.containers.first()).map(|c| c.name.clone()),
        env_records,
        annotation_record,
    };
    Some((WorkloadKey { kind: K::KIND, namespace: namespace.into(), name: obj.name_any() }, summary))
}

/// Sends one patch that merges `template_fragment` into the workload's pod template.
pub async fn patch_template(client: &Client, key: &WorkloadKey, template_fragment: Value) -> Result<(), kube::Error> {
    let body = json!({"spec": {"template": template_fragment}});
    match key.kind {
        WorkloadKind::Deployment => strategic_patch::<Deployment>(client, key, &body).await,
        WorkloadKind::StatefulSet => strategic_patch::<StatefulSet>(client, key, &body).await,
        WorkloadKind::DaemonSet => strategic_patch::<DaemonSet>(client, key, &body).await,
    }
}

async fn strategic_patch<K: WorkloadObject>(
    client: &Client,
    key: &WorkloadKey,
    body: &Value,
) -> Result<(), kube::Error> {
    let api: Api<K> = Api::namespaced(client.clone(), &key.namespace);
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    api.patch(&key.name, &params, &Patch::Strategic(body)).await.map(|_| ())
}
