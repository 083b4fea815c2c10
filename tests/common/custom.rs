//! Argo Rollouts and OpenShift DeploymentConfigs, served by CRDs (no controller runs for them).

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use serde_json::{Value, json};

use super::TestNamespace;

/// The Argo Rollout CRD.
pub const ROLLOUT_CRD: &str = include_str!("../crds/rollouts.argoproj.io.json");
/// The OpenShift DeploymentConfig CRD.
pub const DC_CRD: &str = include_str!("../crds/deploymentconfigs.apps.openshift.io.json");

/// OpenKruise v1.8.4's CloneSet CRD, as the project publishes it (YAML).
pub const CLONESET_CRD: &str = include_str!("../crds/clonesets.apps.kruise.io.yaml");
/// OpenKruise v1.8.4's Advanced StatefulSet CRD (YAML).
pub const KRUISE_STATEFULSET_CRD: &str = include_str!("../crds/statefulsets.apps.kruise.io.yaml");
/// OpenKruise v1.8.4's Advanced DaemonSet CRD (YAML).
pub const KRUISE_DAEMONSET_CRD: &str = include_str!("../crds/daemonsets.apps.kruise.io.yaml");
/// Knative Serving v1.23.0's Service CRD (YAML).
pub const KNATIVE_SERVICE_CRD: &str = include_str!("../crds/services.serving.knative.dev.yaml");

/// Installs a CRD published as YAML (`super::install_crd` takes JSON).
pub async fn install_yaml_crd(client: &kube::Client, yaml: &str) {
    let crd: Value = serde_saphyr::from_str(yaml).expect("CRD YAML");
    super::install_crd(client, &crd.to_string()).await;
}

/// Strimzi's StrimziPodSet CRD (YAML): a kind without a pod template.
pub const STRIMZI_POD_SET_CRD: &str = include_str!("../crds/strimzipodsets.core.strimzi.io.yaml");

/// OpenKruise CloneSets.
pub fn clonesets() -> ApiResource {
    resource("apps.kruise.io", "v1alpha1", "CloneSet", "clonesets")
}

/// An ApiResource by group, version, kind and plural.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Argo Rollouts.
pub fn rollouts() -> ApiResource {
    resource("argoproj.io", "v1alpha1", "Rollout", "rollouts")
}

/// OpenShift DeploymentConfigs.
pub fn deployment_configs() -> ApiResource {
    resource("apps.openshift.io", "v1", "DeploymentConfig", "deploymentconfigs")
}

/// Creates a one-replica object of `ar` with the pod spec and metadata annotations.
pub async fn create_custom(
    ns: &TestNamespace,
    ar: &ApiResource,
    name: &str,
    annotations: Value,
    pod_spec: Value,
) -> Api<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}
    }))
    .expect("object");
    api.create(&PostParams::default(), &obj).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
    api
}
