//! Index behaviour for Secrets (#18): sealed restart records, re-created Secrets, keyed hashes switched on,
//! rotated and off.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::{tests::*, *};
use crate::rules::{annotations::AnnotationKeys, hash};
use crate::workload::summarise;

fn secret(name: &str, value: &str, uid: &str) -> (ConfigKey, ConfigFacts) {
    let data = [("k".to_owned(), k8s_openapi::ByteString(value.as_bytes().to_vec()))].into_iter().collect();
    let key = ConfigKey { kind: ConfigKind::Secret, namespace: NS.into(), name: name.into() };
    (key, ConfigFacts::live(hash::secret(Some(&data)), false, false).sealed_by(uid))
}

fn secret_user(name: &str) -> (WorkloadKey, WorkloadSummary) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                     "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{
            "name": "app", "envFrom": [{"secretRef": {"name": "db"}}]
        }]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
}

fn secret_record(mut ws: WorkloadSummary, hash: ContentHash) -> WorkloadSummary {
    ws.applied_hashes = [((ConfigKind::Secret, "db".to_owned()), hash)].into_iter().collect();
    ws
}

#[test]
fn secret_entries_of_the_record_are_sealed_and_never_the_plain_sha1() {
    let (ck, v1) = secret("db", "123456", "secret-uid");
    let (wk, ws) = secret_user("web");
    let mut index = Index::default();
    index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
    index.upsert_workload(wk.clone(), ws.clone(), Baseline::Current);
    let p = full_plan(&mut index, &wk);
    let written = p.applied_hashes.expect("first sight writes the record");
    let entry = written[&(ConfigKind::Secret, "db".to_owned())];
    assert_eq!(entry, v1.hash.sealed(b"secret-uid"));
    assert_ne!(entry, v1.hash, "the plain SHA-1 of the Secret is not published");

    // A restart finds the sealed entry current: nothing to write; a change while down reloads once.
    let mut restarted = Index::default();
    restarted.upsert_workload(wk.clone(), secret_record(ws.clone(), entry), Baseline::Current);
    restarted.upsert_config(ck.clone(), v1, Baseline::Current);
    assert!(full_plan(&mut restarted, &wk).is_empty());
    let (_, v2) = secret("db", "654321", "secret-uid");
    let mut changed = Index::default();
    changed.upsert_workload(wk.clone(), secret_record(ws, entry), Baseline::Current);
    changed.upsert_config(ck, v2.clone(), Baseline::Current);
    let p = full_plan(&mut changed, &wk);
    assert_eq!(p.reloads.iter().map(|r| r.hash).collect::<Vec<_>>(), vec![v2.hash]);
    let sealed_v2 = v2.hash.sealed(b"secret-uid");
    assert_eq!(p.applied_hashes.map(|r| r[&(ConfigKind::Secret, "db".to_owned())]), Some(sealed_v2));
}

#[test]
fn a_plain_secret_entry_written_by_an_earlier_version_is_resealed_without_a_rollout() {
    let (ck, v1) = secret("db", "123456", "secret-uid");
    let (wk, ws) = secret_user("web");
    let mut index = Index::default();
    index.upsert_workload(wk.clone(), secret_record(ws, v1.hash), Baseline::Current);
    index.upsert_config(ck, v1.clone(), Baseline::Current);
    let p = full_plan(&mut index, &wk);
    assert!(p.reloads.is_empty(), "the content did not change");
    let resealed = p.applied_hashes.map(|r| r[&(ConfigKind::Secret, "db".to_owned())]);
    assert_eq!(resealed, Some(v1.hash.sealed(b"secret-uid")), "rewritten sealed (metadata only)");
}

#[test]
fn a_secret_recreated_with_the_same_content_rolls_nothing_and_with_new_content_rolls_once() {
    for (value, rolls) in [("123456", false), ("654321", true)] {
        let (ck, v1) = secret("db", "123456", "uid-1");
        let (wk, ws) = secret_user("web");
        let mut index = Index::default();
        index.upsert_config(ck.clone(), v1.clone(), Baseline::Current);
        index.upsert_workload(wk.clone(), secret_record(ws, v1.record_hash), Baseline::Current);
        assert!(full_plan(&mut index, &wk).is_empty());
        index.delete_config(&ck, false);
        let (_, recreated) = secret("db", value, "uid-2");
        index.upsert_config(ck, recreated.clone(), Baseline::Current);
        let p = full_plan(&mut index, &wk);
        assert_eq!(!p.reloads.is_empty(), rolls, "{value}");
        let entry = p.applied_hashes.map(|r| r[&(ConfigKind::Secret, "db".to_owned())]);
        assert_eq!(entry, Some(recreated.record_hash), "resealed under the new UID");
    }
}

fn secret_user_recording(value: ContentHash, record: Option<ContentHash>) -> (WorkloadKey, WorkloadSummary) {
    let (key, mut ws) = secret_user("web");
    let (_, with_env) =
        deployment("web", json!({}), json!([{"name": "STAKATER_DB_SECRET", "value": value.to_string()}]));
    ws.env_records = with_env.env_records.into_iter().map(|(c, _, h)| (c, "STAKATER_DB_SECRET".into(), h)).collect();
    if let Some(r) = record {
        ws = secret_record(ws, r);
    }
    (key, ws)
}

fn keyed(key: &[u8]) -> Index {
    let mut index = Index::default();
    index.set_hash_key(crate::hash_key::HashKey::from_bytes(key));
    index
}

#[test]
fn keyed_hashes_switched_on_rotated_and_off_roll_nothing_and_the_next_change_rolls_once() {
    let (k1, k2) = (b"first-key-0123456789".as_slice(), b"second-key-0123456789".as_slice());
    let (ck, v1) = secret("db", "123456", "uid-1");
    let (_, v2) = secret("db", "654321", "uid-1");
    let (_, v3) = secret("db", "000000", "uid-1");

    // Switched on over a template upstream wrote (plain SHA-1, no record): up to date.
    let mut on = keyed(k1);
    let (wk, ws) = secret_user_recording(v1.hash, None);
    on.upsert_workload(wk.clone(), ws, Baseline::Current);
    on.upsert_config(ck.clone(), v1, Baseline::Current);
    assert!(full_plan(&mut on, &wk).reloads.is_empty(), "switching on rolls nothing");
    on.upsert_config(ck.clone(), v2.clone(), Baseline::Current);
    let p = full_plan(&mut on, &wk);
    assert_eq!(p.reloads.len(), 1);
    assert_eq!(p.reloads[0].value, v2.hash.sealed(k1), "the template gets the keyed digest");
    assert_ne!(p.reloads[0].value, v2.hash);

    // What the object says after that reload: keyed template value, sealed record.
    let on_object = || secret_user_recording(v2.hash.sealed(k1), Some(v2.record_hash));
    for (what, mut index) in [("rotated", keyed(k2)), ("switched off", Index::default()), ("restarted", keyed(k1))] {
        let (wk, ws) = on_object();
        index.upsert_workload(wk.clone(), ws, Baseline::Current);
        index.upsert_config(ck.clone(), v2.clone(), Baseline::Current);
        assert!(full_plan(&mut index, &wk).is_empty(), "{what}: nothing rolls");
        index.upsert_config(ck.clone(), v3.clone(), Baseline::Current);
        let p = full_plan(&mut index, &wk);
        assert_eq!(p.reloads.len(), 1, "{what}: the next change rolls once");
    }

    // A keyed template value without a record (e.g. past the record budget): recognised under its key, and
    // after a rotation under the former key kept as `previous`; under an unknown key it is a change.
    let with_previous = crate::hash_key::HashKey::from_bytes(k2).map(|k| k.with_previous(k1));
    for (what, key, rolls) in [("same key", Some(k1), false), ("unknown key", Some(k2), true)] {
        let mut index = keyed(key.unwrap_or_default());
        let (wk, ws) = secret_user_recording(v2.hash.sealed(k1), None);
        index.upsert_workload(wk.clone(), ws, Baseline::Current);
        index.upsert_config(ck.clone(), v2.clone(), Baseline::Current);
        assert_eq!(!full_plan(&mut index, &wk).reloads.is_empty(), rolls, "{what}");
    }
    let mut rotated = Index::default();
    rotated.set_hash_key(with_previous);
    let (wk, ws) = secret_user_recording(v2.hash.sealed(k1), None);
    rotated.upsert_workload(wk.clone(), ws, Baseline::Current);
    rotated.upsert_config(ck, v2, Baseline::Current);
    assert!(full_plan(&mut rotated, &wk).reloads.is_empty(), "former key kept as previous");
}
