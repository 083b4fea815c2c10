//! The bad-input corpus: every annotation key the controller reads × absurd values, on the workload's metadata
//! and on its pod template, and on the resource side. Each goes through what a watch event goes through —
//! summarise, index, plan for a changed resource, pause evaluation — and must never panic; the values that are
//! invalid are reported as a problem naming the key and the value, and a healthy workload next to them in the
//! same index still gets its reload.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use crate::rules::{
    annotations::AnnotationKeys, decision::DecisionSettings, hash::ContentHash, pause, resource::ConfigKind,
    strategy::ReloadStrategy,
};
use crate::{
    constants::annotation::{APPLIED_HASHES, LAST_RELOADED_FROM, PAUSED_AT, ROLLOUT_STRATEGY},
    index::{Baseline, ConfigFacts, ConfigKey, Index},
    workload::summarise,
};

/// The values: empty, whitespace, 10 k characters, an invalid and a catastrophic regex, non-ASCII, upstream's
/// near-miss booleans, and huge, negative, zero, fractional and non-numeric durations.
fn corpus() -> Vec<String> {
    let mut values: Vec<String> = [
        "",
        " ",
        "\t\n",
        "([",
        "(a+)+$",
        "(a|aa)*b{1000}{1000}",
        "日本語,κόσμος,🦀",
        "True ",
        " true",
        "TRUE",
        "yes",
        "3000000000000000h",
        "9223372036854775807ns",
        "9223372037s",
        "-5m",
        "0",
        "0s",
        "1e9h",
        "NaN",
        "5m5",
        ".5s",
        "1.5.5s",
        "ʰ5",
        ",,,",
        "a,,b, ,c",
        "{\"configmap/x\":\"zz\"}",
        "not json",
        "-009999-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
    ]
    .map(str::to_owned)
    .to_vec();
    values.push("x".repeat(10_000));
    values.push(format!("({})", "a|".repeat(5_000)));
    values
}

/// Every key read from a workload, plus the controller's own records.
fn workload_keys(keys: &AnnotationKeys) -> Vec<String> {
    let mut out = vec![keys.auto.clone(), keys.search.clone(), keys.pause_period.clone()];
    out.extend(keys.typed_auto.iter().cloned());
    out.extend(keys.named.iter().cloned());
    out.extend(keys.exclude.iter().cloned());
    out.extend([PAUSED_AT, ROLLOUT_STRATEGY, APPLIED_HASHES, LAST_RELOADED_FROM].map(str::to_owned));
    out
}

fn deployment(name: &str, metadata: serde_json::Value, template: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": metadata},
        "spec": {"paused": true, "selector": {}, "template": {"metadata": {"annotations": template},
            "spec": {"containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment")
}

fn cfg(hash: u8) -> (ConfigKey, ConfigFacts) {
    let data: BTreeMap<String, String> = [("k".to_owned(), hash.to_string())].into();
    let key = ConfigKey { kind: ConfigKind::ConfigMap, namespace: "ns".into(), name: "cfg".into() };
    (key, ConfigFacts::live(crate::rules::hash::configmap(Some(&data), None), false, false))
}

#[test]
fn no_value_of_any_key_panics_and_the_healthy_neighbour_still_reloads() {
    let keys = AnnotationKeys::default();
    let mut index = Index::default();
    let (key, facts) = cfg(1);
    index.upsert_config(key.clone(), facts, Baseline::Current);
    let healthy = deployment("healthy", json!({"reloader.stakater.com/auto": "true"}), json!({}));
    let (healthy_key, summary) = summarise(&healthy, &keys).expect("summary");
    index.upsert_workload(healthy_key.clone(), summary, Baseline::Current);
    let mut bad = Vec::new();
    for (i, annotation) in workload_keys(&keys).iter().enumerate() {
        for (j, value) in corpus().iter().enumerate() {
            for on_template in [false, true] {
                let name = format!("bad-{i}-{j}-{on_template}");
                let pair = json!({annotation.as_str(): value});
                let d = if on_template {
                    deployment(&name, json!({"reloader.stakater.com/auto": "true"}), pair)
                } else {
                    deployment(&name, pair, json!({}))
                };
                let (k, s) = summarise(&d, &keys).expect("summary");
                // Reported problems name the key and carry the value.
                for p in &s.annotations.problems {
                    assert!(p.message.contains(&p.key) || p.key.starts_with("STAKATER_"), "{p:?}");
                }
                if let Some(state) = index.pause_state(&k) {
                    pause::evaluate(&state, true, jiff::Timestamp::now());
                }
                pause::evaluate(&s.pause, true, jiff::Timestamp::now());
                index.upsert_workload(k.clone(), s, Baseline::Current);
                bad.push(k);
            }
        }
    }
    let (_, changed) = cfg(2);
    index.upsert_config(key, changed.clone(), Baseline::Current);
    for k in &bad {
        index.plan(k, DecisionSettings::default(), ReloadStrategy::EnvVars);
        index.plan(
            k,
            DecisionSettings { auto_reload_all: true, ..DecisionSettings::default() },
            ReloadStrategy::Annotations,
        );
    }
    let plan = index.plan(&healthy_key, DecisionSettings::default(), ReloadStrategy::EnvVars);
    assert_eq!(plan.reloads.len(), 1, "the healthy workload reloads: {plan:?}");
    assert_eq!(plan.reloads[0].hash, changed.hash);
}

#[test]
fn invalid_values_are_reported_with_key_and_value() {
    let keys = AnnotationKeys::default();
    let cases = [
        (keys.auto.as_str(), "True "),
        (keys.auto.as_str(), "yes"),
        (keys.typed_auto[0].as_str(), "日本語"),
        (keys.named[0].as_str(), "(["),
        (keys.pause_period.as_str(), "3000000000000000h"),
        (keys.pause_period.as_str(), "-5m"),
        (keys.pause_period.as_str(), "NaN"),
    ];
    for (annotation, value) in cases {
        let d = deployment("d", json!({annotation: value}), json!({}));
        let (_, s) = summarise(&d, &keys).expect("summary");
        let reported = s.annotations.problems.iter().any(|p| p.key == annotation && p.value == value);
        assert!(reported, "{annotation}={value:?} not reported: {:?}", s.annotations.problems);
    }
    // A record we cannot read is no problem of the user's: it is ignored, not reported.
    let d = deployment("d", json!({APPLIED_HASHES: "not json"}), json!({}));
    let (_, s) = summarise(&d, &keys).expect("summary");
    assert!(s.applied_hashes.is_empty() && s.annotations.problems.is_empty());
    assert_eq!(ContentHash::parse_hex("zz"), None);
}
