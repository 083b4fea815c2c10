//! Workloads as the controller watches and lists them: decoded without `metadata.managedFields`.
//!
//! Every workload in a watch event or a list carries its field-ownership records: a JSON tree per field manager
//! (the creator, the workload's own controller writing status, each reload's patch), about as many bytes as the
//! rest of a Deployment. k8s-openapi decodes them into `serde_json::Value` trees — an allocation per key — that
//! nothing here reads, on every event (issue 15: workload events were a fifth of the controller's CPU at M1).
//! [`Lean<K>`] decodes the same object with those records skipped unallocated; everything else is `K` as
//! k8s-openapi (or `custom`) decodes it. Of the records it keeps one fact: which managers wrote part of the `spec`
//! and when ([`spec_writers`]), without their field sets — the restart budget counts at a start only the rollouts
//! this controller started.

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::{
    NamespaceResourceScope,
    apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, OwnerReference, Time},
};
use kube::Resource;
use serde::{Deserialize, Deserializer};

use super::WorkloadObject;

/// A workload decoded without its `managedFields`; `.0` is the object.
#[derive(Clone, Debug)]
pub struct Lean<K>(pub K);

/// The wire shape of every workload kind: metadata, spec, status (`apiVersion`/`kind` are implied by `K`).
#[derive(Deserialize)]
#[serde(bound(deserialize = ""))]
struct Wire<K: WorkloadObject> {
    #[serde(default)]
    metadata: LeanMeta,
    #[serde(default)]
    spec: Option<K::Spec>,
    #[serde(default)]
    status: Option<K::Status>,
}

/// `ObjectMeta` without `managedFields`: serde skips that key (and any other unknown one) without allocating.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    managed_fields: Option<Vec<LeanManagedFields>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

/// One `managedFields` entry: who, when, and whether its fields include part of the `spec` (the field set itself
/// is skipped unallocated).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanManagedFields {
    manager: Option<String>,
    subresource: Option<String>,
    time: Option<Time>,
    #[serde(rename = "fieldsV1")]
    fields: Option<TopFields>,
}

/// The top of a field set: only whether it has `f:spec`.
#[derive(Deserialize)]
struct TopFields {
    #[serde(rename = "f:spec")]
    spec: Option<serde::de::IgnoredAny>,
}

/// The entries of `managed_fields` that own part of the object's `spec` (not of a subresource), kept as
/// `ManagedFieldsEntry` with their manager and time only.
fn spec_writers(managed_fields: Option<Vec<LeanManagedFields>>) -> Option<Vec<ManagedFieldsEntry>> {
    let writers: Vec<ManagedFieldsEntry> = managed_fields?
        .into_iter()
        .filter(|e| {
            e.subresource.as_deref().is_none_or(str::is_empty) && e.fields.as_ref().is_some_and(|f| f.spec.is_some())
        })
        .map(|e| ManagedFieldsEntry { manager: e.manager, time: e.time, ..Default::default() })
        .collect();
    (!writers.is_empty()).then_some(writers)
}

impl From<LeanMeta> for ObjectMeta {
    fn from(m: LeanMeta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: spec_writers(m.managed_fields),
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

impl<'de, K: WorkloadObject> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::<K>::deserialize(deserializer)?;
        Ok(Lean(K::from_parts(wire.metadata.into(), wire.spec, wire.status)))
    }
}

impl<K: WorkloadObject> Resource for Lean<K> {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    use super::*;

    fn deployment_json() -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                "annotations": {"reloader.stakater.com/auto": "true"}, "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u-0"}],
                "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:spec": {"f:template": {"f:spec": {".": {}}}}}}]
            },
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "paused": true, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}
            }},
            "status": {"observedGeneration": 3, "replicas": 1, "updatedReplicas": 1}
        })
    }

    #[test]
    fn decodes_the_object_as_k8s_openapi_does_except_managed_fields() {
        let lean: Lean<Deployment> = serde_json::from_value(deployment_json()).expect("lean");
        let mut full: Deployment = serde_json::from_value(deployment_json()).expect("full");
        assert!(full.metadata.managed_fields.is_some(), "the fixture carries managedFields");
        full.metadata.managed_fields = None;
        let mut lean = lean.0;
        let writers = lean.metadata.managed_fields.take().expect("the spec's writer");
        let kubectl = ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() };
        assert_eq!(writers, vec![kubectl], "only who wrote the spec, without the field set");
        assert_eq!(lean, full);
    }

    fn with_managed_fields(entries: serde_json::Value) -> Deployment {
        let mut value = deployment_json();
        value["metadata"]["managedFields"] = entries;
        serde_json::from_value::<Lean<Deployment>>(value).expect("lean").0
    }

    fn entry(manager: &str, time: &str, fields: serde_json::Value, subresource: Option<&str>) -> serde_json::Value {
        json!({"manager": manager, "operation": "Update", "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields,
               "subresource": subresource})
    }

    /// Issue 38: the restart budget adopts at a start only the rollouts this controller started: it wrote the spec
    /// last. The workload's controller writing its revision annotation or its status does not count.
    #[test]
    fn who_wrote_the_spec_last_is_kept_from_the_managed_fields() {
        let keys = crate::rules::annotations::AnnotationKeys::default();
        let ours = |entries| {
            super::super::summarise(&with_managed_fields(entries), &keys).expect("summary").1.spec_written_last_by_us
        };
        let spec = json!({"f:spec": {"f:template": {}}});
        let reloader = |t| entry("reloader", t, json!({"f:metadata": {}, "f:spec": {}}), None);
        let revision = entry("kube-controller-manager", "2026-01-01T00:00:09Z", json!({"f:metadata": {}}), None);
        let status = entry("kube-controller-manager", "2026-01-01T00:00:09Z", json!({"f:status": {}}), Some("status"));
        let user = |t| entry("helm", t, spec.clone(), None);
        assert!(ours(json!([user("2026-01-01T00:00:01Z"), reloader("2026-01-01T00:00:05Z"), revision, status])));
        assert!(!ours(json!([user("2026-01-01T00:00:07Z"), reloader("2026-01-01T00:00:05Z"), revision, status])));
        assert!(ours(json!([user("2026-01-01T00:00:05Z"), reloader("2026-01-01T00:00:05Z")])), "a tie is ours");
        assert!(!ours(json!([user("2026-01-01T00:00:05Z")])), "never written by this controller");
        assert!(ours(json!([reloader("2026-01-01T00:00:05Z")])));
    }

    #[test]
    fn is_the_same_resource_as_its_kind() {
        assert_eq!(Lean::<Deployment>::url_path(&(), Some("ns")), Deployment::url_path(&(), Some("ns")));
        assert_eq!(Lean::<Deployment>::api_version(&()), "apps/v1");
        assert_eq!(Lean::<Deployment>::kind(&()), "Deployment");
    }

    #[test]
    fn a_bad_field_elsewhere_is_still_an_error() {
        let mut value = deployment_json();
        value["spec"]["paused"] = json!("yes");
        assert!(serde_json::from_value::<Lean<Deployment>>(value).is_err());
    }
}
