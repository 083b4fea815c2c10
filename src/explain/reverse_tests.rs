//! Unit tests of the reverse `explain`: target parsing and exact output.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::*;
use crate::explain::preview::ContentChange;
use crate::rules::annotations::AnnotationKeys;
use crate::rules::hash::ContentHash;
use crate::workload::summarise;

fn workload(name: &str, annotations: serde_json::Value, env_from: &str) -> (WorkloadKey, WorkloadSummary) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "uid": name, "annotations": annotations},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app",
            "envFrom": [{"configMapRef": {"name": env_from}}]}]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
}

/// What the controller sees around `cfg` when nothing is special: it exists, every kind is watched.
fn around(workloads: &[(WorkloadKey, WorkloadSummary)]) -> Surroundings<'_> {
    Surroundings {
        facts: Some(ConfigFacts::live(ContentHash::NONE, false, false)),
        workloads,
        unwatched: &[],
        unreadable: &[],
        not_watched: None,
        namespace_inactive: None,
        preview: None,
    }
}

fn cfg() -> ConfigKey {
    ConfigKey { kind: ConfigKind::ConfigMap, namespace: "shop".into(), name: "cfg".into() }
}

#[test]
fn lists_who_would_roll_who_would_not_and_what_is_not_watched() {
    let workloads = vec![
        workload("web", json!({"reloader.stakater.com/auto": "true"}), "cfg"),
        workload("api", json!({"configmap.reloader.stakater.com/reload": "cfg"}), "other"),
        workload("plain", json!({}), "cfg"),
        workload("elsewhere", json!({"reloader.stakater.com/auto": "true"}), "other"),
    ];
    let around = Surroundings {
        unwatched: &[WorkloadKind::Job],
        unreadable: &[WorkloadKind::StatefulSet],
        ..around(&workloads)
    };
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    assert_eq!(
        text,
        "ConfigMap shop/cfg\n\
         \x20 would roll out (2), strategy env-vars:\n\
         \x20   Deployment api: matched named list \"cfg\"; container app\n\
         \x20   Deployment web: auto: referenced via envFrom; container app\n\
         \x20 use it but would not roll out (1):\n\
         \x20   Deployment plain: no matching annotation\n\
         \x20 Jobs are not watched: never rolled\n\
         \x20 StatefulSets could not be listed with these credentials (forbidden): not in this answer\n"
    );
}

#[test]
fn an_ignored_resource_rolls_nothing_and_says_why() {
    let workloads = vec![workload("web", json!({"reloader.stakater.com/auto": "true"}), "cfg")];
    let around = Surroundings {
        facts: Some(ConfigFacts::live(ContentHash::NONE, true, false)),
        namespace_inactive: Some("ignored (--namespaces-to-ignore)".into()),
        ..around(&workloads)
    };
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::Annotations).to_text();
    assert!(text.contains("namespace shop: ignored (--namespaces-to-ignore); a change rolls nothing"), "{text}");
    assert!(text.contains("would roll out if it were watched (0), strategy annotations"), "{text}");
    assert!(text.contains("Deployment web: ignored: resource has the ignore annotation"), "{text}");
}

#[test]
fn a_proposed_content_names_its_keys_and_rolls_nothing_when_equal() {
    let workloads = vec![workload("web", json!({"reloader.stakater.com/auto": "true"}), "cfg")];
    let mut around = Surroundings {
        preview: Some(ContentChange { changed: vec!["a".into()], added: vec![], removed: vec!["b".into()] }),
        ..around(&workloads)
    };
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    assert_eq!(
        text,
        "ConfigMap shop/cfg\n\
         \x20 new content: changed a; removed b\n\
         \x20 would roll out (1), strategy env-vars:\n\
         \x20   Deployment web: auto: referenced via envFrom; container app\n\
         \x20 use it but would not roll out (0):\n"
    );
    around.preview = Some(ContentChange::default());
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    assert_eq!(
        text,
        "ConfigMap shop/cfg\n\
         \x20 new content: no key changes\n\
         \x20 would roll out (0), strategy env-vars:\n\
         \x20 use it but would not roll out (1):\n\
         \x20   Deployment web: the new content equals the current one\n"
    );
}

#[test]
fn the_json_answer_carries_the_same_facts_for_scripts() {
    let workloads = vec![
        workload("web", json!({"reloader.stakater.com/auto": "true"}), "cfg"),
        workload("plain", json!({}), "cfg"),
    ];
    let around = Surroundings {
        facts: None,
        unwatched: &[WorkloadKind::Job],
        not_watched: Some("ConfigMaps are not watched (--resources-to-ignore)".into()),
        ..around(&workloads)
    };
    let answer = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::Annotations);
    let json = crate::explain::render(&answer, Dependents::to_text, crate::explain::OutputFormat::Json);
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(
        value,
        json!({
            "kind": "ConfigMap", "namespace": "shop", "name": "cfg", "found": false,
            "notWatched": "ConfigMaps are not watched (--resources-to-ignore)", "strategy": "annotations",
            "wouldRoll": [{"kind": "Deployment", "name": "web", "reloads": true,
                           "reason": "auto: referenced via envFrom", "container": "app"}],
            "wouldNotRoll": [{"kind": "Deployment", "name": "plain", "reloads": false,
                              "reason": "no matching annotation"}],
            "unwatchedKinds": ["Job"]
        })
    );
    assert!(
        answer.to_text().contains("  ConfigMaps are not watched (--resources-to-ignore): a change rolls nothing\n")
    );
}

#[test]
fn key_level_readers_roll_only_when_the_keys_they_read_change() {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "reader", "namespace": "shop", "uid": "reader",
                     "annotations": {"reloader.stakater.com/auto": "true", "reloader.stakater.com/reload-on": "keys-used"}},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}]}]}}}
    }))
    .expect("deployment");
    let workloads = vec![
        summarise(&d, &AnnotationKeys::default()).expect("summary"),
        workload("web", json!({"reloader.stakater.com/auto": "true"}), "cfg"),
    ];
    let mut around = around(&workloads);
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    assert!(
        text.contains("    Deployment reader: auto: referenced via env valueFrom; container app; only keys a\n"),
        "{text}"
    );
    around.preview = Some(ContentChange { changed: vec!["b".into()], added: vec![], removed: vec![] });
    let answer = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars);
    assert_eq!(answer.would_roll.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["web"]);
    assert_eq!(answer.would_not_roll[0].reason, "the new content changes b; it reads only a");
    around.preview = Some(ContentChange { changed: vec!["a".into()], added: vec![], removed: vec![] });
    let answer = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars);
    assert_eq!(answer.would_roll.len(), 2, "both read a");
}
