//! What the `evict-pods` and `delete-pods` strategies (`crate::rules::pod_restarts`) read and write on the workload: the
//! label selector that finds its pods, its UID and the pods it should have, read fresh as JSON (every kind,
//! configured ones too); which of the pods found are its own (the owner chain); and the boundary annotation, its
//! pod count recorded at the first step, removed once every pod was restarted.

use std::collections::HashSet;

use k8s_openapi::{
    api::{apps::v1::ReplicaSet, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Client,
    api::{ApiResource, DynamicObject, ListParams, Patch},
};
use serde_json::{Value, json};

use super::{
    WorkloadKey, WorkloadObject,
    kinds::{self, KindVisitor},
    patch::{get_json, patch_for_generation},
};
use crate::constants::annotation::RESTART_PODS_CREATED_BEFORE;

/// How to find a workload's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodTarget {
    /// A label selector (`app=web,tier in (a,b)`): a pre-filter; ownership is the proof ([`pod_owners`]).
    pub selector: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The pods it should have, where its object says: `spec.replicas`, else `status.desiredNumberScheduled`
    /// (DaemonSets and Kruise Advanced DaemonSets, whose controller keeps it while it runs).
    pub replicas: Option<i64>,
}

/// The pods `object` says it should have ([`PodTarget::replicas`]).
fn wanted_pods(object: &Value) -> Option<i64> {
    object["spec"]["replicas"]
        .as_i64()
        .or_else(|| object["status"]["desiredNumberScheduled"].as_i64().filter(|n| *n > 0))
}

/// The label selector of `spec.selector` (`matchLabels`, `matchExpressions`), else of the pod template's labels
/// (kinds without a selector: Knative); `None` when neither selects anything.
pub fn pod_selector(object: &Value, template_pointer: &str) -> Option<String> {
    let mut terms = Vec::new();
    let selector = &object["spec"]["selector"];
    let labels = match selector.get("matchLabels").or_else(|| selector.get("matchExpressions")) {
        Some(_) => &selector["matchLabels"],
        None if template_pointer.is_empty() => &Value::Null,
        None => object.pointer(&format!("{template_pointer}/metadata/labels")).unwrap_or(&Value::Null),
    };
    for (k, v) in labels.as_object().into_iter().flatten() {
        terms.push(format!("{k}={}", v.as_str()?));
    }
    for e in selector["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str()?;
        let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        terms.push(match e["operator"].as_str()? {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    (!terms.is_empty()).then(|| terms.join(","))
}

/// Reads the workload's selector, UID and the pods it should have (`Ok(None)`: nothing selects its pods).
pub async fn pod_target(client: &Client, key: &WorkloadKey) -> Result<Option<PodTarget>, kube::Error> {
    let (resource, pointer) = kinds::visit(key.kind, Resource);
    let api = kube::Api::<DynamicObject>::namespaced_with(client.clone(), &key.namespace, &resource);
    let object = get_json(&api, &key.name).await?;
    let uid = object["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let replicas = wanted_pods(&object);
    Ok(pod_selector(&object, pointer).map(|selector| PodTarget { selector, uid, replicas }))
}

/// The pod's controller is one of `owners` ([`pod_owners`]).
pub fn is_owned(pod: &Pod, owners: &HashSet<String>) -> bool {
    controller_of(pod.metadata.owner_references.as_ref()).is_some_and(|o| owners.contains(&o.uid))
}

/// The controller among `owners`, if one is.
pub fn controller_of(owners: Option<&Vec<OwnerReference>>) -> Option<&OwnerReference> {
    owners.into_iter().flatten().find(|o| o.controller == Some(true))
}

/// The UIDs a pod of the workload has as its controller: the workload's own (a StatefulSet, a DaemonSet, a
/// configured kind's object), and those of the ReplicaSets it controls (a Deployment's: the owner chain
/// Deployment → ReplicaSet → Pod). The ReplicaSets are listed (metadata only, with the workload's selector, which
/// their labels carry) only when a pod found has one as its controller.
pub async fn pod_owners(
    client: &Client,
    namespace: &str,
    target: &PodTarget,
    pods: &[Pod],
) -> Result<HashSet<String>, kube::Error> {
    let mut owners = HashSet::from([target.uid.clone()]);
    let through_replica_sets = pods
        .iter()
        .filter_map(|p| controller_of(p.metadata.owner_references.as_ref()))
        .any(|o| o.kind == "ReplicaSet" && o.uid != target.uid);
    if through_replica_sets && !target.uid.is_empty() {
        let sets = kube::Api::<ReplicaSet>::namespaced(client.clone(), namespace);
        let listed = sets.list_metadata(&ListParams::default().labels(&target.selector)).await?;
        owners.extend(listed.items.into_iter().filter_map(|rs| {
            let controlled = controller_of(rs.metadata.owner_references.as_ref()).is_some_and(|o| o.uid == target.uid);
            controlled.then_some(rs.metadata.uid).flatten()
        }));
    }
    owners.retain(|uid| !uid.is_empty());
    Ok(owners)
}

/// What a workload's pods use (a kind without a pod template, `=-`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodReferences {
    /// The union of their pod specs' references, one entry per resource.
    pub uses: Vec<crate::rules::references::ConfigUse>,
    /// The first container of the first pod (where a named list's reload would go).
    pub first_container: Option<String>,
}

/// Reads what the workload's pods use.
pub async fn pod_uses(client: &Client, key: &WorkloadKey) -> Result<PodReferences, kube::Error> {
    let Some(target) = pod_target(client, key).await? else { return Ok(PodReferences::default()) };
    let pods = kube::Api::<Pod>::namespaced(client.clone(), &key.namespace);
    let listed = pods.list(&ListParams::default().labels(&target.selector)).await?;
    let owners = pod_owners(client, &key.namespace, &target, &listed.items).await?;
    let own = listed.items.iter().filter(|p| is_owned(p, &owners));
    let mut found = PodReferences::default();
    for spec in own.filter_map(|p| p.spec.as_ref()) {
        found.first_container = found.first_container.or_else(|| spec.containers.first().map(|c| c.name.clone()));
        for u in crate::rules::references::config_uses(spec) {
            if !found.uses.iter().any(|known| known.kind == u.kind && known.name == u.name) {
                found.uses.push(u);
            }
        }
    }
    Ok(found)
}

/// Removes the boundary `text`: every pod created before it was restarted. `Ok(false)` when the object holds
/// another value (or none) by now: a boundary written since stays (a JSON Patch `test`, so the API server decides).
pub async fn clear_pod_restart(client: &Client, key: &WorkloadKey, text: &str) -> Result<bool, kube::Error> {
    boundary_patch(client, key, clear_boundary_patch(text)).await
}

/// Replaces the boundary `text` by `with` (the same time, the pod count recorded): `Ok(false)` when the object
/// holds another value by now, as [`clear_pod_restart`].
pub async fn record_pod_count(client: &Client, key: &WorkloadKey, text: &str, with: &str) -> Result<bool, kube::Error> {
    boundary_patch(client, key, json!([test_boundary(text), {"op": "replace", "path": boundary_path(), "value": with}]))
        .await
}

async fn boundary_patch(client: &Client, key: &WorkloadKey, patch: Value) -> Result<bool, kube::Error> {
    let (resource, _) = kinds::visit(key.kind, Resource);
    let url = <DynamicObject as kube::Resource>::url_path(&resource, Some(&key.namespace));
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    match patch_for_generation(client, &url, &key.name, &Patch::<()>::Json(patch)).await {
        Ok(_) => Ok(true),
        // The `test` failed: the boundary is not `text` any more.
        Err(kube::Error::Api(status)) if status.code == 422 => Ok(false),
        Err(e) => Err(e),
    }
}

fn boundary_path() -> String {
    format!("/metadata/annotations/{}", RESTART_PODS_CREATED_BEFORE.replace('~', "~0").replace('/', "~1"))
}

fn test_boundary(text: &str) -> Value {
    json!({"op": "test", "path": boundary_path(), "value": text})
}

/// The JSON Patch removing the boundary annotation if, and only if, it still is `text`.
fn clear_boundary_patch(text: &str) -> Value {
    json!([test_boundary(text), {"op": "remove", "path": boundary_path()}])
}

/// A kind's API resource and template pointer.
struct Resource;

impl KindVisitor for Resource {
    type Output = (ApiResource, &'static str);

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        (ApiResource::erase::<K>(&()), K::template_pointer())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boundary_is_removed_only_while_it_is_the_one_restarted_for() {
        let path = "/metadata/annotations/reloader.stakater.com~1restart-pods-created-before";
        assert_eq!(
            clear_boundary_patch("2026-12-05T10:00:06Z"),
            json!([{"op": "test", "path": path, "value": "2026-12-05T10:00:06Z"}, {"op": "remove", "path": path}])
        );
    }

    #[test]
    fn the_selector_reads_match_labels_and_expressions_else_the_template_labels() {
        let object = json!({"spec": {
            "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}]},
            "template": {"metadata": {"labels": {"app": "web", "extra": "x"}}}}});
        assert_eq!(pod_selector(&object, "/spec/template").as_deref(), Some("app=web,tier in (a,b),!canary"));
        let knative = json!({"spec": {"template": {"metadata": {"labels": {"app": "hello"}}}}});
        assert_eq!(pod_selector(&knative, "/spec/template").as_deref(), Some("app=hello"));
        assert_eq!(pod_selector(&json!({"spec": {"template": {}}}), "/spec/template"), None);
    }

    #[test]
    fn the_recorded_count_replaces_the_boundary_only_while_it_is_the_one_read() {
        let path = "/metadata/annotations/reloader.stakater.com~1restart-pods-created-before";
        let patch = json!([test_boundary("2026-12-05T10:00:06Z"),
            {"op": "replace", "path": boundary_path(), "value": "2026-12-05T10:00:06Z;pods=2"}]);
        assert_eq!(
            patch,
            json!([{"op": "test", "path": path, "value": "2026-12-05T10:00:06Z"},
                {"op": "replace", "path": path, "value": "2026-12-05T10:00:06Z;pods=2"}])
        );
    }

    #[test]
    fn a_pod_is_owned_only_through_its_controller_reference() {
        let pod = |refs: Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"ownerReferences": refs}})).expect("pod")
        };
        let owner = |uid: &str, controller: bool| json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": uid, "controller": controller});
        let owners = HashSet::from(["rs-web".to_owned()]);
        assert!(is_owned(&pod(json!([owner("rs-web", true)])), &owners));
        assert!(!is_owned(&pod(json!([owner("rs-canary", true)])), &owners), "a neighbour's pod");
        assert!(!is_owned(&pod(json!([owner("rs-web", false)])), &owners), "owned, not controlled");
        assert!(!is_owned(&pod(json!([])), &owners), "a bare pod");
    }

    #[test]
    fn the_pods_wanted_come_from_replicas_else_a_daemon_sets_status() {
        assert_eq!(wanted_pods(&json!({"spec": {"replicas": 3}, "status": {"desiredNumberScheduled": 2}})), Some(3));
        assert_eq!(wanted_pods(&json!({"spec": {}, "status": {"desiredNumberScheduled": 2}})), Some(2));
        assert_eq!(wanted_pods(&json!({"spec": {}, "status": {"desiredNumberScheduled": 0}})), None);
        assert_eq!(wanted_pods(&json!({"spec": {"pods": []}})), None, "a StrimziPodSet: recorded at the first step");
    }
}
