//! What the `evict-pods` and `delete-pods` strategies (`crate::pod_restarts`) read and write on the workload: the
//! label selector that finds its pods and the replicas it wants, read fresh as JSON (every kind, configured ones
//! too); and the boundary annotation, removed once every pod was restarted.

use kube::{
    Client,
    api::{ApiResource, DynamicObject, Patch},
};
use serde_json::{Value, json};

use super::{
    WorkloadKey, WorkloadObject,
    kinds::{self, KindVisitor},
    write::{get_json, patch_for_generation},
};
use crate::constants::annotation::RESTART_PODS_CREATED_BEFORE;

/// How to find a workload's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodTarget {
    /// A label selector (`app=web,tier in (a,b)`).
    pub selector: String,
    /// `spec.replicas`, when it has one.
    pub replicas: Option<i64>,
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

/// Reads the workload's selector and replicas (`Ok(None)`: nothing selects its pods).
pub async fn pod_target(client: &Client, key: &WorkloadKey) -> Result<Option<PodTarget>, kube::Error> {
    let (resource, pointer) = kinds::visit(key.kind, Resource);
    let api = kube::Api::<DynamicObject>::namespaced_with(client.clone(), &key.namespace, &resource);
    let object = get_json(&api, &key.name).await?;
    let replicas = object["spec"]["replicas"].as_i64();
    Ok(pod_selector(&object, pointer).map(|selector| PodTarget { selector, replicas }))
}

/// What a workload's pods use (a kind without a pod template, `=-`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodReferences {
    /// The union of their pod specs' references, one entry per resource.
    pub uses: Vec<crate::references::ConfigUse>,
    /// The first container of the first pod (where a named list's reload would go).
    pub first_container: Option<String>,
}

/// Reads what the workload's pods use.
pub async fn pod_uses(client: &Client, key: &WorkloadKey) -> Result<PodReferences, kube::Error> {
    let Some(target) = pod_target(client, key).await? else { return Ok(PodReferences::default()) };
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &key.namespace);
    let listed = pods.list(&kube::api::ListParams::default().labels(&target.selector)).await?;
    let mut found = PodReferences::default();
    for spec in listed.items.iter().filter_map(|p| p.spec.as_ref()) {
        found.first_container = found.first_container.or_else(|| spec.containers.first().map(|c| c.name.clone()));
        for u in crate::references::config_uses(spec) {
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
    let (resource, _) = kinds::visit(key.kind, Resource);
    let url = <DynamicObject as kube::Resource>::url_path(&resource, Some(&key.namespace));
    let patch: json_patch::Patch =
        serde_json::from_value(clear_boundary_patch(text)).map_err(kube::Error::SerdeError)?;
    match patch_for_generation(client, &url, &key.name, &Patch::<()>::Json(patch)).await {
        Ok(_) => Ok(true),
        // The `test` failed: the boundary is not `text` any more.
        Err(kube::Error::Api(status)) if status.code == 422 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The JSON Patch removing the boundary annotation if, and only if, it still is `text`.
fn clear_boundary_patch(text: &str) -> Value {
    let path = format!("/metadata/annotations/{}", RESTART_PODS_CREATED_BEFORE.replace('~', "~0").replace('/', "~1"));
    json!([{"op": "test", "path": path, "value": text}, {"op": "remove", "path": path}])
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
}
