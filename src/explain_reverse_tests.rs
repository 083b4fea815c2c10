//! Unit tests of the reverse `explain`: target parsing and exact output.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::*;
use crate::hash::ContentHash;

#[test]
fn config_targets_take_kubectl_kind_names() {
    for (text, kind) in [
        ("configmap/cfg", ConfigKind::ConfigMap),
        ("cm/cfg", ConfigKind::ConfigMap),
        ("Secrets/cfg", ConfigKind::Secret),
    ] {
        assert_eq!(parse_config_target(text), Some((kind, "cfg".to_owned())), "{text}");
    }
    for bad in ["cfg", "deployment/web", "configmap/", "/cfg"] {
        assert_eq!(parse_config_target(bad), None, "{bad}");
    }
}

fn workload(name: &str, annotations: serde_json::Value, env_from: &str) -> (WorkloadKey, WorkloadSummary) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "uid": name, "annotations": annotations},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app",
            "envFrom": [{"configMapRef": {"name": env_from}}]}]}}}
    }))
    .expect("deployment");
    summarise(&d, &AnnotationKeys::default()).expect("summary")
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
        facts: Some(ConfigFacts::live(ContentHash::NONE, false, false)),
        workloads: &workloads,
        unwatched: &[WorkloadKind::Job],
        kind_unwatched: false,
        namespace_inactive: None,
    };
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::EnvVars);
    assert_eq!(
        text,
        "ConfigMap shop/cfg\n\
         \x20 would roll out (2), strategy env-vars:\n\
         \x20   Deployment api: matched named list \"cfg\"; container app\n\
         \x20   Deployment web: auto: referenced via envFrom; container app\n\
         \x20 use it but would not roll out (1):\n\
         \x20   Deployment plain: no matching annotation\n\
         \x20 Jobs are not watched: never rolled\n"
    );
}

#[test]
fn an_ignored_resource_rolls_nothing_and_says_why() {
    let workloads = vec![workload("web", json!({"reloader.stakater.com/auto": "true"}), "cfg")];
    let around = Surroundings {
        facts: Some(ConfigFacts::live(ContentHash::NONE, true, false)),
        workloads: &workloads,
        unwatched: &[],
        kind_unwatched: false,
        namespace_inactive: Some("ignored (--namespaces-to-ignore)".into()),
    };
    let text = explain_dependents(&cfg(), &around, DecisionSettings::default(), ReloadStrategy::Annotations);
    assert!(text.contains("namespace shop: ignored (--namespaces-to-ignore); a change rolls nothing"), "{text}");
    assert!(text.contains("would roll out if it were watched (0), strategy annotations"), "{text}");
    assert!(text.contains("Deployment web: ignored: resource has the ignore annotation"), "{text}");
}
