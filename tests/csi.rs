//! Secrets Store CSI integration with real CRDs: SecretProviderClass and SecretProviderClassPodStatus objects
//! are written the way the CSI driver writes them; a change of mounted versions reloads the workloads that
//! mount the class — not other auto workloads (unlike upstream v2), not when the class is ignored, and not
//! silenced by a resource label selector (unlike upstream v1).

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

const SPC_CRD: &str = include_str!("crds/secretproviderclasses.secrets-store.csi.x-k8s.io.json");
const SPCPS_CRD: &str = include_str!("crds/secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io.json");

fn ar(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", kind), plural)
}

fn mounts(class: &str) -> serde_json::Value {
    json!({
        "containers": [{"name": "app", "image": "x", "volumeMounts": [{"name": "secrets", "mountPath": "/mnt/secrets"}]}],
        "volumes": [{"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": true,
                     "volumeAttributes": {"secretProviderClass": class}}}]
    })
}

async fn create_class(ns: &TestNamespace, name: &str, annotations: serde_json::Value) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &ar("SecretProviderClass", "secretproviderclasses"));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"provider": "vault", "parameters": {"objects": "- objectName: db"}}
    }))
    .expect("spc");
    api.create(&PostParams::default(), &obj).await.expect("create spc");
}

/// What the driver writes per pod: `<pod>-<namespace>-<class>`, owned by the pod.
async fn write_pod_statuses(ns: &TestNamespace, app: &str, class: &str, version: &str) {
    let pods = ns.api::<Pod>().list(&ListParams::default().labels(&format!("app={app}"))).await.expect("pods");
    assert!(!pods.items.is_empty(), "no pods for {app}");
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ar("SecretProviderClassPodStatus", "secretproviderclasspodstatuses"),
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

fn spc_hash(class: &str, version: &str) -> String {
    reloader::hash::secret_provider_class(class, [("secret/db", version), ("secret/api", "7")]).to_string()
}

#[tokio::test]
async fn mounted_version_changes_reload_the_workloads_that_mount_the_class() {
    let ns = TestNamespace::create("csi").await;
    install_crd(&ns.client, SPC_CRD).await;
    install_crd(&ns.client, SPCPS_CRD).await;
    create_class(&ns, "vault-db", json!({})).await;
    create_class(&ns, "quiet", json!({"reloader.stakater.com/ignore": "true"})).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), mounts("vault-db"))
        .await;
    Kind::Deployment
        .create(
            &ns,
            "typed",
            json!({"secretproviderclass.reloader.stakater.com/auto": "true"}),
            json!({}),
            mounts("vault-db"),
        )
        .await;
    Kind::Deployment
        .create(&ns, "unmounted", json!({"reloader.stakater.com/auto": "true"}), json!({}), plain_pod())
        .await;
    let named = json!({"secretproviderclass.reloader.stakater.com/reload": "vault-.*"});
    Kind::Deployment.create(&ns, "named", named, json!({}), mounts("vault-db")).await;
    let excluded = json!({"reloader.stakater.com/auto": "true", "secretproviderclasses.exclude.reloader.stakater.com/reload": "vault-db"});
    Kind::Deployment.create(&ns, "excluded", excluded, json!({}), mounts("vault-db")).await;
    Kind::Deployment
        .create(&ns, "ignored", json!({"reloader.stakater.com/auto": "true"}), json!({}), mounts("quiet"))
        .await;
    for app in ["web", "typed", "ignored", "named", "excluded"] {
        wait_for(&format!("pods of {app}"), RELOAD_WAIT, || async {
            let n = ns
                .api::<Pod>()
                .list(&ListParams::default().labels(&format!("app={app}")))
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            if n > 0 { Ok(()) } else { Err("none".into()) }
        })
        .await;
    }
    for app in ["web", "typed", "named", "excluded"] {
        write_pod_statuses(&ns, app, "vault-db", "1").await;
    }
    write_pod_statuses(&ns, "ignored", "quiet", "1").await;
    // A label selector on ConfigMaps/Secrets must not silence CSI (upstream v1 bug).
    let _reloader =
        Reloader::start(&ns.name, &["--enable-csi-integration", "--resource-label-selector=team=none"]).await;

    // The driver notices the rotation pod by pod.
    write_pod_statuses(&ns, "web", "vault-db", "2").await;
    write_pod_statuses(&ns, "ignored", "quiet", "2").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    Kind::Deployment.wait_revisions(&ns, "typed", 2).await;
    Kind::Deployment.wait_revisions(&ns, "named", 2).await;
    let expected = spc_hash("vault-db", "2");
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_VAULT_DB_SECRETPROVIDERCLASS").await,
        Some(expected.clone())
    );
    assert_eq!(
        Kind::Deployment.env(&ns, "typed", "app", "STAKATER_VAULT_DB_SECRETPROVIDERCLASS").await,
        Some(expected)
    );
    // The lagging pods of "typed" report the same new versions later: no second rollout.
    write_pod_statuses(&ns, "typed", "vault-db", "2").await;
    Kind::Deployment.stays_at_revisions(&ns, "typed", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "unmounted", 1).await;
    Kind::Deployment.stays_at_revisions(&ns, "ignored", 1).await;
    Kind::Deployment.stays_at_revisions(&ns, "excluded", 1).await;
}
