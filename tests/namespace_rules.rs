//! Namespace rules on the real control plane (issue 29, upstream stakater/Reloader#274): with `--namespace-rules`, a
//! Namespace's `reloader.stakater.com/auto`, `…/ignore` and `…/pause` apply to every workload in it that has no
//! value of its own; `explain` says when a namespace rule decided.

mod common;

use common::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

const RULES: &str = "--namespace-rules=true";
const APPLIED: &str = "reloader.stakater.com/applied-hashes";

/// Sets (or with `null` removes) annotations on the test namespace.
async fn annotate_namespace(ns: &TestNamespace, annotations: Value) {
    let namespaces = Api::<Namespace>::all(testenv::harness::client().await);
    let patch = Patch::Merge(json!({"metadata": {"annotations": annotations}}));
    namespaces.patch(&ns.name, &PatchParams::default(), &patch).await.expect("annotate namespace");
}

/// Waits until `name`'s `applied-hashes` record holds ConfigMap `cfg` at data `k=value`.
async fn wait_record(ns: &TestNamespace, name: &str, value: &str) {
    let hash = configmap_hash(&[("k", value)]);
    wait_for(&format!("{name}'s record to hold k={value}"), RELOAD_WAIT, || async {
        let d = ns.api::<Deployment>().get(name).await.map_err(|e| e.to_string())?;
        let record = d.metadata.annotations.unwrap_or_default().get(APPLIED).cloned().unwrap_or_default();
        if record.contains(&hash) { Ok(()) } else { Err(record) }
    })
    .await;
}

async fn env_hash(ns: &TestNamespace, name: &str) -> Option<String> {
    Kind::Deployment.env(ns, name, "app", "STAKATER_CFG_CONFIGMAP").await
}

#[tokio::test]
async fn a_namespace_auto_rolls_its_workloads_without_annotations_unless_they_opt_out() {
    let ns = TestNamespace::create("ns-auto").await;
    annotate_namespace(&ns, json!({"reloader.stakater.com/auto": "true"})).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "plain", json!({}), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment
        .create(&ns, "opted-out", json!({"reloader.stakater.com/auto": "false"}), json!({}), env_from_configmap("cfg"))
        .await;
    let reloader = Reloader::start(&ns.name, &[RULES]).await;
    wait_record(&ns, "plain", "1").await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "plain", 2).await;
    let line = reloader.wait_log("updated 'plain' of type").await;
    assert!(line.contains("namespace auto: its namespace has auto, referenced via envFrom"), "{line}");
    assert_eq!(env_hash(&ns, "plain").await, Some(configmap_hash(&[("k", "2")])));
    // The same change rolled its neighbour: the controller acted on it.
    Kind::Deployment.stays_at_revisions(&ns, "opted-out", 1).await;

    let (ok, out, err) = explain_with(&ns, &[RULES], "deploy/plain", &[]);
    assert!(ok, "{err}");
    assert!(out.contains("namespace auto: its namespace has auto"), "{out}");
    // Without the flag the namespace's annotation means nothing, as upstream.
    let (ok, out, err) = explain_with(&ns, &[], "deploy/plain", &[]);
    assert!(ok && !out.contains("namespace auto"), "{out}{err}");
}

#[tokio::test]
async fn a_namespace_ignore_skips_and_a_namespace_pause_defers_until_lifted() {
    let ns = TestNamespace::create("ns-ignore-pause").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    let keeps = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/ignore": "false"});
    Kind::Deployment.create(&ns, "keeps", keeps, json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &[RULES]).await;
    wait_record(&ns, "web", "1").await;
    wait_record(&ns, "keeps", "1").await;

    // Ignored: the change is recorded on `web` (the evidence the controller saw it) and rolls nothing there;
    // `keeps` says otherwise and rolls.
    annotate_namespace(&ns, json!({"reloader.stakater.com/ignore": "true"})).await;
    reloader.wait_log(&format!("namespace '{}' rules for its workloads: ignore", ns.name)).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "keeps", 2).await;
    wait_record(&ns, "web", "2").await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    let (ok, out, err) = explain_with(&ns, &[RULES], "deploy/web", &[]);
    assert!(ok && out.contains("ignored: its namespace has the ignore annotation"), "{out}{err}");

    // Paused instead: both wait (the log line, the Event, explain), then roll once, with the newest content, when
    // the pause is lifted — the ignored change is not applied later.
    annotate_namespace(&ns, json!({"reloader.stakater.com/ignore": null, "reloader.stakater.com/pause": "true"})).await;
    reloader.wait_log(&format!("namespace '{}' rules for its workloads: pause", ns.name)).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    for name in ["web", "keeps"] {
        let waits = format!("Deployment '{name}' in namespace '{}' waits: paused: its namespace has", ns.name);
        reloader.wait_log(&waits).await;
    }
    let (ok, out, err) = explain_with(&ns, &[RULES], "deploy/web", &[]);
    assert!(ok && out.contains("  waits: paused: its namespace has reloader.stakater.com/pause"), "{out}{err}");
    assert_eq!(Kind::Deployment.revisions(&ns, "web").await, 1);
    assert_eq!(Kind::Deployment.revisions(&ns, "keeps").await, 2);

    set_configmap_data(&ns, "cfg", &[("k", "4")]).await;
    annotate_namespace(&ns, json!({"reloader.stakater.com/pause": "maybe"})).await;
    reloader.wait_log("annotation \"reloader.stakater.com/pause\" value \"maybe\": not true or false").await;
    // The Namespace gets the Event too (in `default`, as Events of cluster-scoped objects are).
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(ns.client.clone());
    wait_for("an InvalidAnnotation Event on the Namespace", RELOAD_WAIT, || async {
        let list = events.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let on_namespace = list.items.into_iter().filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some("Namespace") && r.name == Some(ns.name.clone()))
        });
        let notes: Vec<String> =
            on_namespace.filter(|e| e.reason.as_deref() == Some("InvalidAnnotation")).filter_map(|e| e.note).collect();
        if notes.iter().any(|n| n.contains("value \"maybe\"")) { Ok(()) } else { Err(format!("{notes:?}")) }
    })
    .await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    Kind::Deployment.wait_revisions(&ns, "keeps", 3).await;
    let v4 = configmap_hash(&[("k", "4")]);
    assert_eq!(env_hash(&ns, "web").await.as_deref(), Some(v4.as_str()));
    assert_eq!(env_hash(&ns, "keeps").await.as_deref(), Some(v4.as_str()));
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "keeps", 3).await;
}
