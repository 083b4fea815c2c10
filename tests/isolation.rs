//! Fault isolation on the real control plane (issue: "never stall"): what one kind, one tenant's annotation or
//! one oversized object does must not stop reloads of anything else.
//!
//! - A kind the controller may not list (the DeploymentConfig API served, its RBAC missing) answers 403
//!   forever: the controller syncs without it, names it, and reloads Deployments.
//! - A pause period of 3,000,000,000,000,000 hours (out of Go's range) is reported and the reload still
//!   happens, unpaused; a Deployment in another namespace still reloads afterwards.
//! - A named list matching many long-named ConfigMaps, and a Deployment whose annotations are at the 256 KiB
//!   limit already: the `applied-hashes` record stays within its budget, and when even that does not fit,
//!   the reload is written without it.
//! - An API that answers one namespace's updates 503 (a webhook or aggregated API down): reloads elsewhere go on
//!   at once, and the refused ones land once the API is back.

mod common;

use common::{
    custom::DC_CRD,
    rbac::{Scope, service_account_with_rules},
    *,
};
use k8s_openapi::api::{apps::v1::Deployment, events::v1::Event};
use serde_json::json;

/// A ServiceAccount allowed everything the controller needs in `ns` except `apps.openshift.io`.
async fn service_account_without_deploymentconfigs(ns: &TestNamespace) -> std::path::PathBuf {
    let read = ["get", "list", "watch"];
    let write = ["get", "list", "watch", "patch", "update"];
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": read},
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": write},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": ["get", "list", "watch", "patch", "create", "delete"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
    ]);
    service_account_with_rules(ns, "reloader", rules, Scope::Namespace).await
}

#[tokio::test]
async fn a_kind_the_controller_may_not_list_does_not_stop_reloads_of_the_others() {
    let ns = TestNamespace::create("forbidden-kind").await;
    install_crd(&ns.client, DC_CRD).await;
    let kubeconfig = service_account_without_deploymentconfigs(&ns).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let reloader = Reloader::start_with_env(&ns.name, &[], &[("KUBECONFIG", kubeconfig.as_str())]).await;
    let named = reloader.wait_log("watch of deploymentconfigs.apps.openshift.io").await;
    assert!(named.contains("forbidden") && named.contains(&ns.name), "{named}");

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "2")]))
    );
    let base = reloader.http_base().await;
    let (_, metrics) = http_get(&base, "/metrics").await;
    let series =
        format!("reloader_watch_failing{{namespace=\"{}\",resource=\"deploymentconfigs.apps.openshift.io\"}}", ns.name);
    assert_eq!(sample(&metrics, &series), Some(1.0), "{metrics}");
    let (status, _) = http_get(&base, "/readyz").await;
    assert_eq!(status, 200, "an optional kind failing leaves the controller ready");
}

/// Issue 38, finding 5: `--namespaces a,b` with the controller's Role only in `a`. Reloads in `a` work, so the
/// controller is ready: `/readyz` answers 200 and names what cannot be watched in `b` as degraded, as do
/// `reloader_watch_failing` and one log line per source. Before, `/readyz` stayed 503 ("watches have not synced
/// yet") for good while `a` reloaded.
#[tokio::test]
async fn a_watched_namespace_without_rbac_is_degraded_not_unready() {
    let ns = TestNamespace::create("ready-with-role").await;
    let bare = TestNamespace::create("ready-without-role").await;
    let kubeconfig = service_account_without_deploymentconfigs(&ns).await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let scope = format!("--namespaces={},{}", ns.name, bare.name);
    let reloader = Reloader::start_unscoped(&[scope.as_str()], &[("KUBECONFIG", kubeconfig.as_str())]).await;
    let named = reloader.wait_log(&format!("list and watch on configmaps in namespace {}", bare.name)).await;
    assert!(named.contains("forbidden"), "{named}");

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let base = reloader.http_base().await;
    let degraded = format!("configmaps in {}: ", bare.name);
    let body = wait_for("/readyz to answer 200 naming the namespace without RBAC", RELOAD_WAIT, || async {
        match http_get(&base, "/readyz").await {
            (200, body) if body.contains(&degraded) => Ok(body),
            (status, body) => Err(format!("{status}: {body}")),
        }
    })
    .await;
    assert!(body.starts_with("ok\ndegraded (reloads go on): not watched:"), "{body}");
    assert!(!body.contains(&format!("configmaps in {}:", ns.name)), "the namespace with its Role is whole: {body}");
    let (_, metrics) = http_get(&base, "/metrics").await;
    assert_eq!(sample(&metrics, "reloader_ready"), Some(1.0), "{metrics}");
    let series = format!("reloader_watch_failing{{namespace=\"{}\",resource=\"configmaps\"}}", bare.name);
    assert_eq!(sample(&metrics, &series), Some(1.0), "{metrics}");
    assert_eq!(reloader.count_log(&format!("watch of configmaps in {} failed", bare.name)), 1, "said once");
}

#[tokio::test]
async fn an_absurd_pause_period_is_reported_and_stops_nothing() {
    let tenant = TestNamespace::create("absurd-pause").await;
    let other = TestNamespace::create("absurd-pause-other").await;
    let absurd = "3000000000000000h";
    for ns in [&tenant, &other] {
        create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
    }
    // More Deployments than workers: each used to take a worker down with it.
    let annotations =
        json!({"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": absurd});
    for i in 0..5 {
        Kind::Deployment
            .create(&tenant, &format!("web-{i}"), annotations.clone(), json!({}), env_from_configmap("cfg"))
            .await;
    }
    Kind::Deployment
        .create(&other, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let scope = format!("--namespaces={},{}", tenant.name, other.name);
    let reloader = Reloader::start_unscoped(&[&scope], &[]).await;
    let line = reloader.wait_log(absurd).await;
    assert!(line.contains("pause-period") && line.contains("out of range"), "{line}");

    set_configmap_data(&tenant, "cfg", &[("k", "2")]).await;
    for i in 0..5 {
        Kind::Deployment.wait_revisions(&tenant, &format!("web-{i}"), 2).await;
    }
    let d = tenant.api::<Deployment>().get("web-0").await.expect("get");
    assert_ne!(d.spec.and_then(|s| s.paused), Some(true), "an invalid period reloads without pausing");
    let events = tenant.api::<Event>().list(&Default::default()).await.expect("events");
    let invalid = events.items.iter().filter(|e| e.reason.as_deref() == Some("InvalidAnnotation")).count();
    assert!(invalid >= 5, "one InvalidAnnotation Event per Deployment, found {invalid}");

    set_configmap_data(&other, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&other, "web", 2).await;
    let (_, metrics) = http_get(&reloader.http_base().await, "/metrics").await;
    assert_eq!(sample(&metrics, "reloader_reconcile_panics_total"), Some(0.0));
}

/// `kubectl apply`'s record of `len` bytes (the Deployment controller does not copy it to ReplicaSets).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn filler(len: usize) -> serde_json::Value {
    json!("x".repeat(len))
}

#[tokio::test]
async fn the_applied_record_never_outgrows_the_object_nor_blocks_a_reload() {
    let ns = TestNamespace::create("record-budget").await;
    create_configmap(&ns, "main", &[("k", "1")], &[]).await;
    let long = "x".repeat(200);
    let creates = (0..120).map(|i| {
        let name = format!("cfg-{long}-{i}");
        let ns = &ns;
        async move { create_configmap(ns, &name, &[("k", "1")], &[]).await }
    });
    futures::future::join_all(creates).await;
    // 120 matches of ~260 bytes each: a 31 KiB record on top of 240 KB of annotations.
    let many = json!({"configmap.reloader.stakater.com/reload": "cfg-.*,main", LAST_APPLIED: filler(240_000)});
    Kind::Deployment.create(&ns, "many", many, json!({}), env_from_configmap("main")).await;
    // Annotations 20 bytes short of the 256 KiB limit (with the revision annotation the Deployment controller
    // adds): even a one-entry record does not fit.
    let full = json!({"configmap.reloader.stakater.com/reload": "main", LAST_APPLIED: filler(262_000)});
    Kind::Deployment.create(&ns, "full", full, json!({}), plain_pod()).await;
    let _reloader = Reloader::start(&ns.name, &[]).await;

    set_configmap_data(&ns, "main", &[("k", "2")]).await;
    let hash = configmap_hash(&[("k", "2")]);
    for name in ["many", "full"] {
        Kind::Deployment.wait_revisions(&ns, name, 2).await;
        assert_eq!(
            Kind::Deployment.env(&ns, name, "app", "STAKATER_MAIN_CONFIGMAP").await,
            Some(hash.clone()),
            "{name}"
        );
    }
    let many = ns.api::<Deployment>().get("many").await.expect("get");
    let record = many.metadata.annotations.unwrap_or_default().remove("reloader.stakater.com/applied-hashes");
    let record = record.expect("a record");
    assert!(record.len() <= 4096, "record of {} bytes", record.len());
    assert!(record.contains("configmap/main"), "the resource the pods use is kept: {record}");
    // The controller does not keep retrying what cannot fit.
    Kind::Deployment.stays_at_revisions(&ns, "full", 2).await;
}

#[tokio::test]
async fn a_record_that_no_longer_fits_is_cleared_with_the_reload_so_it_never_rolls_again() {
    let ns = TestNamespace::create("record-clear").await;
    create_configmap(&ns, "main", &[("k", "1")], &[]).await;
    create_configmap(&ns, "other", &[("k", "1")], &[]).await;
    // The API server counts keys and values against 262,144 bytes. Besides the filler: the last-applied key (48),
    // the reload annotation (38 + 10), the record's key (36) and the Deployment controller's revision annotation
    // (33 + 1), which may not be there yet when the reload is written. That leaves 78 bytes for the record's value
    // (112 without the revision): the one-entry record (61) fits either way, the two-entry one (122) never does.
    let old = format!("{{\"configmap/main\":\"{}\"}}", configmap_hash(&[("k", "1")]));
    let meta = json!({"configmap.reloader.stakater.com/reload": "main,other", LAST_APPLIED: filler(261_900),
                      "reloader.stakater.com/applied-hashes": old});
    Kind::Deployment.create(&ns, "web", meta, json!({}), env_from_configmap("main")).await;
    let mut first = Reloader::start(&ns.name, &[]).await;
    set_configmap_data(&ns, "main", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let d = ns.api::<Deployment>().get("web").await.expect("get");
    let record = d.metadata.annotations.unwrap_or_default().remove("reloader.stakater.com/applied-hashes");
    assert_eq!(record.as_deref(), Some("{}"), "the stale record is cleared, not left older than the template");
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    first.kill();
    let second = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    assert_eq!(second.count_log("updated 'web'"), 0);
}

#[tokio::test]
async fn a_change_made_while_the_role_was_missing_is_applied_once_it_is_back() {
    use k8s_openapi::api::rbac::v1::Role;
    use kube::api::{Patch, PatchParams, PostParams};

    let ns = TestNamespace::create("role-restored").await;
    let kubeconfig = service_account_without_deploymentconfigs(&ns).await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let reloader = Reloader::start_with_env(&ns.name, &[], &[("KUBECONFIG", kubeconfig.as_str())]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;

    // The Role goes away (a GitOps sync, a namespace being rebuilt) while the content changes.
    let roles = ns.api::<Role>();
    let role = roles.get("reloader").await.expect("role");
    roles.delete("reloader", &Default::default()).await.expect("delete role");
    wait_for("the Role to stop granting", RELOAD_WAIT, || async {
        let probe = json!({"metadata": {"annotations": {"probe": "x"}}});
        let client = testenv::cluster::client_from_kubeconfig(std::path::Path::new(&kubeconfig))
            .await
            .map_err(|e| e.to_string())?;
        let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> = kube::Api::namespaced(client, &ns.name);
        match api.patch("web", &PatchParams::default().dry_run(), &Patch::Merge(&probe)).await {
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
            other => Err(format!("{:?}", other.map(|_| ()))),
        }
    })
    .await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    reloader.wait_log("forbidden").await;
    let restored =
        Role { metadata: kube::api::ObjectMeta { name: Some("reloader".into()), ..Default::default() }, ..role };
    roles.create(&PostParams::default(), &restored).await.expect("restore role");

    // No further change: the one made meanwhile is applied, once.
    Kind::Deployment.wait_revisions(&ns, "web", 3).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "3")]))
    );
    Kind::Deployment.stays_at_revisions(&ns, "web", 3).await;
}

/// An API that refuses one namespace's Deployment updates with 503 for as long as it is down (here an admission
/// webhook answering so; an unavailable aggregated API answers the same), more Deployments there than workers,
/// all due for a reload: a Deployment in another namespace still reloads at once. With kube's default retry
/// policy each 503 was retried for ≈ 3 minutes inside the request, holding a worker all that time.
#[tokio::test]
async fn an_api_answering_503_in_one_namespace_holds_up_no_reload_elsewhere() {
    let down = TestNamespace::create("unavailable").await;
    let other = TestNamespace::create("unavailable-other").await;
    for ns in [&down, &other] {
        create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
    }
    let auto = json!({"reloader.stakater.com/auto": "true"});
    for i in 0..6 {
        Kind::Deployment.create(&down, &format!("web-{i}"), auto.clone(), json!({}), env_from_configmap("cfg")).await;
    }
    Kind::Deployment.create(&other, "web", auto, json!({}), env_from_configmap("cfg")).await;
    let scope = format!("--namespaces={},{}", down.name, other.name);
    // A short backoff cap, so the refused ones are tried soon after the API is back.
    let reloader = Reloader::start_unscoped(&[&scope, "--max-retry-backoff=5s"], &[]).await;
    let webhook = webhook::RefusingWebhook::start(&down, 503, "web-0").await;

    set_configmap_data(&down, "cfg", &[("k", "2")]).await;
    // Every worker has met the 503 before the other namespace's change arrives.
    let probed = webhook.calls();
    wait_for("the controller's updates refused", RELOAD_WAIT, || async {
        let refused = webhook.calls() - probed;
        if refused >= 4 { Ok(()) } else { Err(format!("{refused} refused so far")) }
    })
    .await;
    set_configmap_data(&other, "cfg", &[("k", "2")]).await;
    let hash = configmap_hash(&[("k", "2")]);
    wait_for("the other namespace's Deployment reloaded", RELOAD_WAIT, || async {
        match Kind::Deployment.env(&other, "web", "app", "STAKATER_CFG_CONFIGMAP").await {
            Some(h) if h == hash => Ok(()),
            got => Err(format!("STAKATER_CFG_CONFIGMAP = {got:?}\n{}", reloader.logs().join("\n"))),
        }
    })
    .await;
    // The refused ones are still tried, not dropped: once the API is back they reload (each once).
    drop(webhook);
    for i in 0..6 {
        Kind::Deployment.wait_revisions(&down, &format!("web-{i}"), 2).await;
    }
    Kind::Deployment.stays_at_revisions(&down, "web-0", 2).await;
}
