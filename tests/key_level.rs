//! Key-level reloads on the real control plane (#16): with `reloader.stakater.com/reload-on: keys-used`, a
//! workload that reads some keys of a ConfigMap or Secret rolls only when one of those keys changes — for each
//! reference form, in both strategies — and records the hash of those keys only; `envFrom` and whole volumes
//! read every key. Opting in and out rolls nothing by itself, and a restart rolls nothing.

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::{
    ByteString,
    api::{apps::v1::Deployment, core::v1::Pod},
};
use kube::{
    ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::{Value, json};

const KEYS_USED: &str = "reloader.stakater.com/reload-on";

fn opted_in() -> Value {
    json!({"reloader.stakater.com/auto": "true", KEYS_USED: "keys-used"})
}

fn value_from(kind_ref: &str, name: &str, key: &str) -> Value {
    json!([{"name": "READ", "valueFrom": {kind_ref: {"name": name, "key": key}}}])
}

/// Each reference form, and whether it reads only key `a` of ConfigMap `cfg` (else every key).
fn forms() -> Vec<(&'static str, Value, bool)> {
    let mount = json!([{"name": "v", "mountPath": "/v"}]);
    vec![
        (
            "value-from",
            json!({"containers": [{"name": "app", "image": "x", "env": value_from("configMapKeyRef", "cfg", "a")}]}),
            true,
        ),
        (
            "items",
            json!({"containers": [{"name": "app", "image": "x", "volumeMounts": mount}],
            "volumes": [{"name": "v", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}}]}),
            true,
        ),
        (
            "projected",
            json!({"containers": [{"name": "app", "image": "x", "volumeMounts": mount}],
            "volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}}]}}]}),
            true,
        ),
        (
            "init",
            json!({"initContainers": [{"name": "init", "image": "x", "env": value_from("configMapKeyRef", "cfg", "a")}],
            "containers": [{"name": "app", "image": "x"}]}),
            true,
        ),
        ("env-from", env_from_configmap("cfg"), false),
        (
            "whole-volume",
            json!({"containers": [{"name": "app", "image": "x", "volumeMounts": mount}],
            "volumes": [{"name": "v", "configMap": {"name": "cfg"}}]}),
            false,
        ),
    ]
}

/// Upstream's ConfigMap hash over key `a` only: what a key-level reader records.
fn hash_of_a(value: &str) -> String {
    let data = BTreeMap::from([("a".to_owned(), value.to_owned())]);
    reloader::rules::hash::configmap(Some(&data), None).to_string()
}

/// What the workload's template records for `kind`/`name` in this strategy.
async fn recorded(ns: &TestNamespace, name: &str, env: &str, annotations: bool) -> Option<String> {
    if !annotations {
        return Kind::Deployment.env(ns, name, "app", env).await;
    }
    let template = Kind::Deployment.template(ns, name).await;
    let text = template.metadata.and_then(|m| m.annotations)?.remove("reloader.stakater.com/last-reloaded-from")?;
    let value: Value = serde_json::from_str(&text).ok()?;
    value["hash"].as_str().map(str::to_owned)
}

/// The note of the latest `Reloaded` Event on a workload.
async fn reloaded_note(ns: &TestNamespace, workload: &str) -> String {
    wait_for(&format!("a Reloaded Event on {workload}"), RELOAD_WAIT, || async {
        let list = ns
            .api::<k8s_openapi::api::events::v1::Event>()
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut mine = list.items.into_iter().filter(|e| {
            e.reason.as_deref() == Some("Reloaded")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(workload)
        });
        mine.next_back().and_then(|e| e.note).ok_or_else(|| "none yet".to_owned())
    })
    .await
}

/// The names of the workload's pods, to show they were left alone.
async fn pods(ns: &TestNamespace, app: &str) -> Vec<String> {
    let list = ns.api::<Pod>().list(&ListParams::default().labels(&format!("app={app}"))).await.expect("pods");
    let mut names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
    names.sort();
    names
}

async fn each_form_rolls_for_its_keys_only(strategy: &str) {
    let annotations = strategy == "annotations";
    let ns = TestNamespace::create(&format!("keys-{strategy}")).await;
    create_configmap(&ns, "cfg", &[("a", "1"), ("b", "1")], &[]).await;
    create_secret(&ns, "db", &[("password", "p1"), ("user", "u1")], &[]).await;
    for (name, spec, _) in forms() {
        Kind::Deployment.create(&ns, name, opted_in(), json!({}), spec).await;
    }
    let secret_reader =
        json!({"containers": [{"name": "app", "image": "x", "env": value_from("secretKeyRef", "db", "password")}]});
    Kind::Deployment.create(&ns, "secret-reader", opted_in(), json!({}), secret_reader).await;
    let reloader = Reloader::start(&ns.name, &[&format!("--reload-strategy={strategy}")]).await;
    // The controller reads what it needs and records the key hash for each reader, without a rollout.
    wait_for("every reader's record", RELOAD_WAIT, || async {
        let list = ns.api::<Deployment>().list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let records =
            list.items.iter().filter(|d| d.annotations().contains_key("reloader.stakater.com/applied-hashes"));
        let n = records.count();
        if n == 7 { Ok(()) } else { Err(format!("{n} of 7")) }
    })
    .await;
    let before = pods(&ns, "value-from").await;

    // An unread key changes: only the forms that read every key roll.
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "2")]).await;
    for (name, _, partial) in forms() {
        if !partial {
            Kind::Deployment.wait_revisions(&ns, name, 2).await;
        }
    }
    for (name, _, partial) in forms() {
        if partial {
            Kind::Deployment.stays_at_revisions(&ns, name, 1).await;
        }
    }
    assert_eq!(pods(&ns, "value-from").await, before, "the pods are left alone");
    let why = format!(
        "Changes detected in 'cfg' of type 'CONFIGMAP' in namespace '{}' (changed keys b); 'value-from' of type 'Deployment' reads only a: not rolled",
        ns.name
    );
    reloader.wait_log(&why).await;

    // The read key changes: every form rolls exactly once more, the readers with the hash of `a` alone.
    set_configmap_data(&ns, "cfg", &[("a", "2"), ("b", "2")]).await;
    for (name, _, partial) in forms() {
        Kind::Deployment.wait_revisions(&ns, name, if partial { 2 } else { 3 }).await;
    }
    // The reload names the key it applies (names only): `a` for a reader of `a`, as for any other.
    let note = reloaded_note(&ns, "value-from").await;
    assert!(note.ends_with(" (changed keys: a)"), "{note}");
    for (name, _, partial) in forms() {
        Kind::Deployment.stays_at_revisions(&ns, name, if partial { 2 } else { 3 }).await;
        let value = recorded(&ns, name, "STAKATER_CFG_CONFIGMAP", annotations).await;
        let expected = if partial { hash_of_a("2") } else { configmap_hash(&[("a", "2"), ("b", "2")]) };
        assert_eq!(value, Some(expected), "{name}");
    }

    // A Secret read through secretKeyRef: another key changes, nothing; the password changes, one rollout.
    let updates = reloader.events("update", "secrets").await;
    set_secret_value(&ns, "db", "user", "u2").await;
    updates.wait_grown(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "secret-reader", 1).await;
    set_secret_value(&ns, "db", "password", "p2").await;
    Kind::Deployment.wait_revisions(&ns, "secret-reader", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "secret-reader", 2).await;
    let data = BTreeMap::from([("password".to_owned(), ByteString(b"p2".to_vec()))]);
    let expected = reloader::rules::hash::secret(Some(&data)).to_string();
    assert_eq!(recorded(&ns, "secret-reader", "STAKATER_DB_SECRET", annotations).await, Some(expected));
    drop(reloader);
}

#[tokio::test]
async fn each_reference_form_rolls_for_the_keys_it_reads_with_env_vars() {
    each_form_rolls_for_its_keys_only("env-vars").await;
}

#[tokio::test]
async fn each_reference_form_rolls_for_the_keys_it_reads_with_annotations() {
    each_form_rolls_for_its_keys_only("annotations").await;
}

/// Waits until the workload's `applied-hashes` record holds `hash`: the controller has planned it since the
/// change that makes it record that hash.
async fn wait_record_holds(ns: &TestNamespace, name: &str, hash: &str) {
    wait_for(&format!("{name}'s applied-hashes record to hold {hash}"), RELOAD_WAIT, || async {
        let d = ns.api::<Deployment>().get(name).await.map_err(|e| e.to_string())?;
        let record = d.annotations().get("reloader.stakater.com/applied-hashes").cloned().unwrap_or_default();
        if record.contains(hash) { Ok(()) } else { Err(record) }
    })
    .await;
}

async fn set_reload_on(ns: &TestNamespace, name: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {KEYS_USED: value}}});
    ns.api::<Deployment>().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("annotate");
}

#[tokio::test]
async fn opting_in_and_out_rolls_nothing_and_neither_does_a_restart() {
    let ns = TestNamespace::create("keys-flip").await;
    create_configmap(&ns, "cfg", &[("a", "1"), ("b", "1")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "env": value_from("configMapKeyRef", "cfg", "a")}]});
    Kind::Deployment.create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), spec).await;
    let mut first = Reloader::start(&ns.name, &[]).await;
    // Not opted in: any key rolls it (upstream's behaviour).
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;

    // Opting in: the record follows, to the hash of the key read, and nothing rolls.
    set_reload_on(&ns, "web", Some("keys-used")).await;
    wait_record_holds(&ns, "web", &hash_of_a("1")).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    let updates = first.events("update", "configmaps").await;
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "3")]).await;
    updates.wait_grown(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;

    // A restart while opted in rolls nothing; nor does an unread change made while it was down.
    first.kill();
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "4")]).await;
    let second = Reloader::start(&ns.name, &[]).await;
    second.wait_reconciled(1).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    assert_eq!(second.count_log("updated 'web'"), 0);

    // Opting out: the record follows, to the whole content's hash, and nothing rolls.
    set_reload_on(&ns, "web", None).await;
    wait_record_holds(&ns, "web", &configmap_hash(&[("a", "1"), ("b", "4")])).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "5")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 3).await;
    Kind::Deployment.stays_at_revisions(&ns, "web", 3).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await,
        Some(configmap_hash(&[("a", "1"), ("b", "5")])),
        "opted out: the whole content's hash again"
    );
}

#[tokio::test]
async fn the_flag_opts_every_workload_in_and_the_annotation_opts_one_out() {
    let ns = TestNamespace::create("keys-flag").await;
    create_configmap(&ns, "cfg", &[("a", "1"), ("b", "1")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "env": value_from("configMapKeyRef", "cfg", "a")}]});
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "default", auto.clone(), json!({}), spec.clone()).await;
    let out = json!({"reloader.stakater.com/auto": "true", KEYS_USED: "any-key"});
    Kind::Deployment.create(&ns, "out", out, json!({}), spec).await;
    let _reloader = Reloader::start_with_env(&ns.name, &[], &[("RELOADER_RELOAD_ON", "keys-used")]).await;
    wait_record_holds(&ns, "default", &hash_of_a("1")).await;
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "out", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "default", 1).await;
}

#[tokio::test]
async fn a_bad_reload_on_value_is_reported_and_the_workload_still_reloads() {
    let ns = TestNamespace::create("keys-bad").await;
    create_configmap(&ns, "cfg", &[("a", "1"), ("b", "1")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x", "env": value_from("configMapKeyRef", "cfg", "a")}]});
    let bad = json!({"reloader.stakater.com/auto": "true", KEYS_USED: "some-keys"});
    Kind::Deployment.create(&ns, "web", bad, json!({}), spec).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let note = wait_for("an InvalidAnnotation Event naming the value", RELOAD_WAIT, || async {
        let list = ns
            .api::<k8s_openapi::api::events::v1::Event>()
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let found = list.items.into_iter().find(|e| e.reason.as_deref() == Some("InvalidAnnotation"));
        found.and_then(|e| e.note).ok_or_else(|| "none yet".to_owned())
    })
    .await;
    assert!(note.contains("\"some-keys\"") && note.contains(KEYS_USED), "{note}");
    assert!(reloader.count_log("some-keys") >= 1, "logged too");
    // --reload-on decides (any-key): a change of the unread key rolls it.
    set_configmap_data(&ns, "cfg", &[("a", "1"), ("b", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
}
