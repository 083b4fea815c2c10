//! Cross-namespace references in the index (issues 29, 38): which workloads a change in another namespace concerns,
//! what their plans write — and that a refused reference (no flag, no consent) leaves no trace on the workload, and
//! that gate peers stay in the workload's namespace.

use std::collections::BTreeMap;

use serde_json::json;

use super::record_tests::with_applied_hashes;
use super::tests::{NS, cm, deployment};
use super::*;
use crate::rules::{decision::DecisionSettings, strategy::ReloadStrategy};

const REMOTE: &str = "istio-system";

/// ConfigMap `name` of [`REMOTE`] with `allow-references-from: consent`.
fn remote(name: &str, value: &str, consent: Option<&str>) -> (ConfigKey, ConfigFacts) {
    let (mut key, facts) = cm(name, value);
    key.namespace = REMOTE.into();
    (key, facts.consenting(consent))
}

/// An index as the controller sets it up with `--allow-cross-namespace-references` or without.
fn index(cross_namespace: bool) -> Index {
    let mut index = Index::default();
    index.set_cross_namespace(cross_namespace);
    index
}

fn settings(cross_namespace: bool) -> DecisionSettings {
    DecisionSettings { cross_namespace, ..DecisionSettings::default() }
}

/// With the flag and the resource's consent, a `<namespace>/<name>` entry finds the workload from the other
/// namespace's change and reloads it into the first container, under its own record entry and `STAKATER_*` name.
#[test]
fn a_cross_namespace_entry_reloads_with_the_flag_and_the_resources_consent() {
    let mut index = index(true);
    let (wk, ws) =
        deployment("web", json!({"configmap.reloader.stakater.com/reload": "istio-system/stable-tag"}), json!([]));
    let (local, lf) = cm("stable-tag", "local");
    let (ck, v1) = remote("stable-tag", "v1", Some("ns"));
    index.upsert_config(local.clone(), lf, Baseline::Current);
    index.upsert_config(ck.clone(), v1, Baseline::Current);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    assert!(index.candidates(&local).is_empty(), "the local namesake is not named");
    assert_eq!(index.candidates(&ck), std::slice::from_ref(&wk));
    let (_, v2) = remote("stable-tag", "v2", Some("ns"));
    index.upsert_config(ck.clone(), v2.clone(), Baseline::Current);
    let plan = index.plan(&wk, settings(true), ReloadStrategy::EnvVars);
    assert_eq!(plan.reloads.len(), 1);
    let r = &plan.reloads[0];
    assert_eq!((r.pair.1.as_str(), r.container.as_str(), r.value), ("istio-system/stable-tag", "app", v2.hash));
    assert_eq!(crate::rules::resource::env_var_name(r.pair.0, &r.pair.1), "STAKATER_ISTIO_SYSTEM_STABLE_TAG_CONFIGMAP");
    let record = BTreeMap::from([((ConfigKind::ConfigMap, "istio-system/stable-tag".to_owned()), v2.hash)]);
    assert_eq!(plan.applied_hashes, Some(record));
    index.mark_written(&wk, &plan);
    assert!(index.plan(&wk, settings(true), ReloadStrategy::EnvVars).is_empty(), "written once");
}

/// Issue 38, finding 3: a tenant names another namespace's resource and plants a record entry for it. Refused
/// (without the flag; with it, without the resource's consent, or with a consent naming another namespace), the
/// plan is the same whether the resource is absent, exists, changes, is deleted (tombstone) or forgotten: no
/// reload, and the record of its own resources only — the planted entry dropped, never following the content.
#[test]
fn a_refused_reference_leaves_the_workload_the_same_whatever_the_resource_does() {
    let planted = ContentHash::delete_marker();
    for (flag, consent) in [(false, Some("ns")), (true, None), (true, Some("other,ns-2"))] {
        let case = format!("flag {flag}, consent {consent:?}");
        let mut index = index(flag);
        let meta = json!({"configmap.reloader.stakater.com/reload": "cfg,istio-system/stable-tag"});
        let (wk, ws) = deployment("web", meta, json!([]));
        let ws = with_applied_hashes(ws, &[("istio-system/stable-tag", planted)]);
        let (local, lv) = cm("cfg", "local");
        let local_hash = lv.hash;
        index.upsert_config(local, lv, Baseline::Current);
        index.upsert_workload(wk.clone(), ws, Baseline::Current);
        let (ck, _) = remote("stable-tag", "v1", consent);
        let expected = WorkloadPlan {
            applied_hashes: Some(BTreeMap::from([((ConfigKind::ConfigMap, "cfg".to_owned()), local_hash)])),
            object_has_record: true,
            ..WorkloadPlan::default()
        };
        let plan = |index: &mut Index, state: &str| {
            assert_eq!(index.plan(&wk, settings(flag), ReloadStrategy::EnvVars), expected, "{case}: {state}");
        };
        plan(&mut index, "absent");
        for value in ["v1", "v2"] {
            index.upsert_config(ck.clone(), remote("stable-tag", value, consent).1, Baseline::Current);
            plan(&mut index, value);
        }
        index.delete_config(&ck, true);
        plan(&mut index, "deleted (tombstone)");
        index.delete_config(&ck, true);
        plan(&mut index, "forgotten");
        if !flag {
            index.upsert_config(ck.clone(), remote("stable-tag", "v3", consent).1, Baseline::Current);
            assert!(index.candidates(&ck).is_empty(), "{case}: not indexed at all");
        }
    }
}

/// Consent given after changes made while refused: recorded, not applied (as for any opt-out); the next change
/// reloads.
#[test]
fn consent_given_later_applies_the_next_change_not_those_made_while_refused() {
    let mut index = index(true);
    let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": "istio-system/cfg"}), json!([]));
    index.upsert_config(remote("cfg", "v1", None).0, remote("cfg", "v1", None).1, Baseline::Current);
    index.upsert_workload(wk.clone(), ws, Baseline::Current);
    let (ck, v2) = remote("cfg", "v2", None);
    index.upsert_config(ck.clone(), v2, Baseline::Current);
    assert!(index.plan(&wk, settings(true), ReloadStrategy::EnvVars).is_empty(), "refused: nothing");
    let (_, consented) = remote("cfg", "v2", Some("*"));
    assert_eq!(index.upsert_config(ck.clone(), consented.clone(), Baseline::Current), ConfigUpdate::MetadataOnly);
    let plan = index.plan(&wk, settings(true), ReloadStrategy::EnvVars);
    assert!(plan.reloads.is_empty());
    let pair = (ConfigKind::ConfigMap, "istio-system/cfg".to_owned());
    assert_eq!(plan.applied_hashes, Some(BTreeMap::from([(pair, consented.hash)])));
    index.mark_written(&wk, &plan);
    let (_, v3) = remote("cfg", "v3", Some("*"));
    index.upsert_config(ck, v3.clone(), Baseline::Current);
    let plan = index.plan(&wk, settings(true), ReloadStrategy::EnvVars);
    assert_eq!(
        plan.reloads.iter().map(|r| (r.pair.1.as_str(), r.value)).collect::<Vec<_>>(),
        [("istio-system/cfg", v3.hash)]
    );
}

/// A Secret of another namespace is never written on the tenant's template as its plain SHA-1: without
/// `--hash-key-secret` sealed under the Secret's UID (the record's form), with it keyed as any Secret.
#[test]
fn a_remote_secret_is_written_keyed_never_as_its_plain_sha1() {
    let secret = |value: &str| {
        let data = [("k".to_owned(), k8s_openapi::ByteString(value.as_bytes().to_vec()))].into_iter().collect();
        let key = ConfigKey { kind: ConfigKind::Secret, namespace: REMOTE.into(), name: "db".into() };
        (
            key,
            ConfigFacts::live(crate::rules::hash::secret(Some(&data)), false, false)
                .sealed_by("uid-db")
                .consenting(Some("*")),
        )
    };
    for hash_key in [None, crate::hash_key::HashKey::from_bytes(b"hash-key-0123456789")] {
        let mut index = index(true);
        index.set_hash_key(hash_key.clone());
        let (wk, ws) = deployment("web", json!({"secret.reloader.stakater.com/reload": "istio-system/db"}), json!([]));
        index.upsert_config(secret("1").0, secret("1").1, Baseline::Current);
        index.upsert_workload(wk.clone(), ws, Baseline::Current);
        let (ck, v2) = secret("2");
        index.upsert_config(ck, v2.clone(), Baseline::Current);
        let plan = index.plan(&wk, settings(true), ReloadStrategy::EnvVars);
        let expected = match &hash_key {
            None => v2.hash.sealed(b"uid-db"),
            Some(k) => v2.hash.sealed(k.bytes()),
        };
        assert_ne!(expected, v2.hash);
        assert_eq!(plan.reloads.iter().map(|r| r.value).collect::<Vec<_>>(), [expected], "{hash_key:?}");
    }
}

/// Issue 38, finding 4: a workload's gate peers are of its own namespace only. A tenant's paused wave-0
/// workload naming `ns/cfg` (allowed, consented) is no peer of `ns`'s wave-1 `api`; `ns`'s own wave-0 `db` is.
#[test]
fn gate_peers_are_of_the_workloads_own_namespace_only() {
    let mut index = index(true);
    let wave = |name: &str, wave: &str| {
        deployment(
            name,
            json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-wave": wave}),
            json!([]),
        )
    };
    let (api, api_summary) = wave("api", "1");
    let (db, db_summary) = wave("db", "0");
    let evil_meta = json!({"configmap.reloader.stakater.com/reload": "ns/cfg", "reloader.stakater.com/pause": "true",
                           "reloader.stakater.com/rollout-wave": "0"});
    let (mut evil, evil_summary) = deployment("evil", evil_meta, json!([]));
    evil.namespace = "tenant".into();
    let (ck, v1) = cm("cfg", "v1");
    index.upsert_config(ck.clone(), v1.consenting(Some("tenant")), Baseline::Current);
    for (key, summary) in [(&api, api_summary), (&db, db_summary), (&evil, evil_summary)] {
        index.upsert_workload(key.clone(), summary, Baseline::Current);
    }
    let (_, v2) = cm("cfg", "v2");
    index.upsert_config(ck.clone(), v2.consenting(Some("tenant")), Baseline::Current);
    assert_eq!(index.candidates(&ck), [api.clone(), db.clone(), evil.clone()]);
    let peers = |index: &mut Index, key: &WorkloadKey| {
        let plan = index.plan(key, settings(true), ReloadStrategy::EnvVars);
        assert_eq!(plan.reloads.len(), 1, "{key} reloads for the change");
        let changes = index.gate_changes(key, &plan.reloads, settings(true), |_| false);
        changes[0].peers.iter().map(|p| p.key.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(peers(&mut index, &api), ["Deployment ns/db"]);
    assert_eq!(peers(&mut index, &evil), Vec::<String>::new());
    assert_eq!(&*db.namespace, NS);
}
