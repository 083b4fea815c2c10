//! Secrets Store CSI integration with real CRDs: SecretProviderClass and SecretProviderClassPodStatus objects
//! are written the way the CSI driver writes them; a change of mounted versions reloads the workloads that
//! mount the class — not other auto workloads (unlike upstream v2), not when the class is ignored, and not
//! silenced by a resource label selector (unlike upstream v1); the annotations strategy records the class.

mod common;

use common::csi::*;
use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use serde_json::json;

fn spc_hash(class: &str, version: &str) -> String {
    reloader::rules::hash::secret_provider_class(class, [("secret/db", version), ("secret/api", "7")]).to_string()
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

#[tokio::test]
async fn with_the_annotations_strategy_a_rotation_writes_last_reloaded_from() {
    let ns = TestNamespace::create("csi-annot").await;
    install_crd(&ns.client, SPC_CRD).await;
    install_crd(&ns.client, SPCPS_CRD).await;
    create_class(&ns, "vault-db", json!({})).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), mounts("vault-db"))
        .await;
    wait_for("pods of web", RELOAD_WAIT, || async {
        let pods = ns.api::<Pod>().list(&ListParams::default().labels("app=web")).await.map_err(|e| e.to_string())?;
        if pods.items.is_empty() { Err("none".to_owned()) } else { Ok(()) }
    })
    .await;
    write_pod_statuses(&ns, "web", "vault-db", "1").await;
    let _reloader = Reloader::start(&ns.name, &["--enable-csi-integration", "--reload-strategy=annotations"]).await;

    write_pod_statuses(&ns, "web", "vault-db", "2").await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let template = Kind::Deployment.template(&ns, "web").await;
    let text = template
        .metadata
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("reloader.stakater.com/last-reloaded-from").cloned())
        .expect("last-reloaded-from written");
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(value["type"], "SECRETPROVIDERCLASS");
    assert_eq!(value["name"], "vault-db");
    assert_eq!(value["namespace"], ns.name.as_str());
    assert_eq!(value["hash"], spc_hash("vault-db", "2").as_str());
    assert_eq!(value["containerRefs"], json!(["app"]));
    assert_eq!(Kind::Deployment.env(&ns, "web", "app", "STAKATER_VAULT_DB_SECRETPROVIDERCLASS").await, None);
}
