//! Secrets Store CSI objects written the way the driver writes them.

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::TestNamespace;

pub const SPC_CRD: &str = include_str!("../crds/secretproviderclasses.secrets-store.csi.x-k8s.io.json");
pub const SPCPS_CRD: &str = include_str!("../crds/secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io.json");

/// The ApiResource of a Secrets Store CSI kind.
pub fn csi_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", kind), plural)
}

/// A pod spec mounting the SecretProviderClass `class` through the CSI driver.
pub fn mounts(class: &str) -> serde_json::Value {
    json!({
        "containers": [{"name": "app", "image": "x", "volumeMounts": [{"name": "secrets", "mountPath": "/mnt/secrets"}]}],
        "volumes": [{"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": true,
                     "volumeAttributes": {"secretProviderClass": class}}}]
    })
}

/// Creates a SecretProviderClass.
pub async fn create_class(ns: &TestNamespace, name: &str, annotations: serde_json::Value) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &csi_resource("SecretProviderClass", "secretproviderclasses"),
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"provider": "vault", "parameters": {"objects": "- objectName: db"}}
    }))
    .expect("spc");
    api.create(&PostParams::default(), &obj).await.expect("create spc");
}

/// What the driver writes per pod: `<pod>-<namespace>-<class>`, owned by the pod.
pub async fn write_pod_statuses(ns: &TestNamespace, app: &str, class: &str, version: &str) {
    let pods = ns.api::<Pod>().list(&ListParams::default().labels(&format!("app={app}"))).await.expect("pods");
    assert!(!pods.items.is_empty(), "no pods for {app}");
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &csi_resource("SecretProviderClassPodStatus", "secretproviderclasspodstatuses"),
    );
    for pod in pods.items {
        let name = format!("{}-{}-{class}", pod.name_any(), ns.name);
        let body = json!({
            "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
            "metadata": {"name": name, "labels": {"secrets-store.csi.k8s.io/node-name": "kwok-node-0"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid().unwrap_or_default()}]},
            "status": {"podName": pod.name_any(), "secretProviderClassName": class, "mounted": true, "targetPath": "/var/lib/kubelet/pods/x",
                       "objects": [{"id": "secret/db", "version": version}, {"id": "secret/api", "version": "7"}]}
        });
        let params = PatchParams::apply("secrets-store-csi-driver").force();
        api.patch(&name, &params, &Patch::Apply(&body)).await.expect("apply pod status");
    }
}
