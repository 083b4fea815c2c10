//! Unit tests of the keys a pod spec consumes, per reference form.

use serde_json::json;

use super::*;

fn keys_of(spec: serde_json::Value, kind: ConfigKind, name: &str) -> Option<Vec<String>> {
    let spec: PodSpec = serde_json::from_value(spec).expect("pod spec");
    let uses = config_uses(&spec);
    let found = uses.iter().find(|u| u.kind == kind && u.name == name).expect("a use");
    found.keys.as_ref().map(|k| k.to_vec())
}

fn list(keys: &[&str]) -> Option<Vec<String>> {
    Some(keys.iter().map(|k| (*k).to_owned()).collect())
}

#[test]
fn value_from_reads_its_key_in_containers_and_init_containers() {
    let spec = json!({
        "initContainers": [{"name": "init", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "b"}}}]}],
        "containers": [{"name": "app", "env": [
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}},
            {"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "z"}}},
            {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
        ]}]
    });
    assert_eq!(keys_of(spec.clone(), ConfigKind::ConfigMap, "cfg"), list(&["a", "b"]));
    assert_eq!(keys_of(spec, ConfigKind::Secret, "db"), list(&["password"]));
}

#[test]
fn volume_and_projected_items_read_their_keys() {
    let spec = json!({
        "containers": [{"name": "app", "volumeMounts": [{"name": "v", "mountPath": "/v"}, {"name": "p", "mountPath": "/p"}]}],
        "volumes": [
            {"name": "v", "configMap": {"name": "cfg", "items": [{"key": "app.yaml", "path": "app.yaml"}]}},
            {"name": "p", "projected": {"sources": [
                {"configMap": {"name": "cfg", "items": [{"key": "log.yaml", "path": "log.yaml"}]}},
                {"secret": {"name": "tls", "items": [{"key": "tls.crt", "path": "crt"}]}}
            ]}}
        ]
    });
    assert_eq!(keys_of(spec.clone(), ConfigKind::ConfigMap, "cfg"), list(&["app.yaml", "log.yaml"]));
    assert_eq!(keys_of(spec, ConfigKind::Secret, "tls"), list(&["tls.crt"]));
}

#[test]
fn env_from_a_whole_volume_or_empty_items_read_every_key() {
    let env_from = json!({"containers": [{"name": "app",
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}],
        "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    assert_eq!(keys_of(env_from, ConfigKind::ConfigMap, "cfg"), None);
    let whole = json!({
        "containers": [{"name": "app", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "db", "key": "a"}}}],
                        "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
        "volumes": [{"name": "v", "secret": {"secretName": "db"}}]
    });
    assert_eq!(keys_of(whole, ConfigKind::Secret, "db"), None);
    let empty_items = json!({
        "containers": [{"name": "app", "volumeMounts": [{"name": "p", "mountPath": "/p"}]}],
        "volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "cfg", "items": []}}]}}]
    });
    assert_eq!(keys_of(empty_items, ConfigKind::ConfigMap, "cfg"), None);
}

#[test]
fn an_unmounted_volume_reads_nothing() {
    // The env use counts; the volume nobody mounts does not widen it to every key.
    let spec = json!({
        "containers": [{"name": "app", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}]}],
        "volumes": [{"name": "v", "configMap": {"name": "cfg"}}]
    });
    assert_eq!(keys_of(spec, ConfigKind::ConfigMap, "cfg"), list(&["a"]));
}
