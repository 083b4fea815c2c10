//! The objects a scenario creates: namespaces, ConfigMaps/Secrets with unique content, and workloads with
//! upstream's load-test template (`reloader.stakater.com/auto: "true"`, busybox, 1 replica — never pulled,
//! KWOK runs the pods).

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    core::v1::{ConfigMap, Namespace, Secret},
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};

use super::{ConfigDef, ConfigKind, NamedLists, RefHow, WorkloadDef};
use crate::{Error, measure::tracker::Kind};

/// Label on every object of one scenario run; the tracker watches by it.
pub const RUN_LABEL: &str = "reloader-bench/run";
/// Label on the bench's namespaces (`kubectl delete ns -l reloader-bench` cleans up after a crash).
pub const NAMESPACE_LABEL: &str = "reloader-bench";
/// The annotation every workload carries.
pub const AUTO: &str = "reloader.stakater.com/auto";
/// Upstream's named lists (reloader-behaviour.md §1.1): comma-separated names or regular expressions.
pub const NAMED_CONFIGMAPS: &str = "configmap.reloader.stakater.com/reload";
/// The same for Secrets.
pub const NAMED_SECRETS: &str = "secret.reloader.stakater.com/reload";
/// Our key-level reloads opt-in (a workload reading `value` only rolls when `value` changes).
pub const RELOAD_ON: &str = "reloader.stakater.com/reload-on";
/// Upstream's pause-period key (reloader-behaviour.md §1.1).
pub const PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";

/// The content of a resource at update `seq`: a unique `value` (so every content has its own hash) plus
/// `pad_bytes` of padding.
pub fn content(def: &ConfigDef, namespace: &str, seq: u64) -> BTreeMap<String, String> {
    let kind = match def.kind {
        ConfigKind::ConfigMap => "cm",
        ConfigKind::Secret => "secret",
    };
    let mut data = BTreeMap::from([("value".to_owned(), format!("{kind}/{namespace}/{}/{seq}", def.name))]);
    if def.pad_bytes > 0 {
        let pad: String = "0123456789abcdef".chars().cycle().take(def.pad_bytes).collect();
        data.insert("pad".to_owned(), pad);
    }
    data
}

/// Creates a namespace labelled for the bench.
pub async fn create_namespace(client: &Client, name: &str) -> Result<(), Error> {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {NAMESPACE_LABEL: "true"}}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map(|_| ())
        .map_err(|e| Error::kube(format!("create namespace {name}"), e))
}

/// Asks for a namespace's deletion (the API server finishes it in the background).
pub async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone()).delete(name, &DeleteParams::background()).await;
}

/// Creates a resource with `data`.
pub async fn create_config(
    client: &Client,
    def: &ConfigDef,
    namespace: &str,
    run: &str,
    data: &BTreeMap<String, String>,
) -> Result<(), Error> {
    let meta = json!({"name": def.name, "namespace": namespace, "labels": {RUN_LABEL: run}});
    let what = || format!("create {:?} {namespace}/{}", def.kind, def.name);
    match def.kind {
        ConfigKind::ConfigMap => {
            let cm: ConfigMap = serde_json::from_value(json!({"metadata": meta, "data": data}))?;
            Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .create(&PostParams::default(), &cm)
                .await
                .map(|_| ())
        }
        ConfigKind::Secret => {
            let secret: Secret = serde_json::from_value(json!({"metadata": meta, "data": secret_data(data)}))?;
            Api::<Secret>::namespaced(client.clone(), namespace)
                .create(&PostParams::default(), &secret)
                .await
                .map(|_| ())
        }
    }
    .map_err(|e| Error::kube(what(), e))
}

/// Secret `data` values are base64 on the wire; the hash is over the decoded bytes.
pub fn secret_data(data: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    data.iter().map(|(k, v)| (k.clone(), b64.encode(v.as_bytes()))).collect()
}

/// The pod spec of a workload using `refs` (resolved to (kind, name) pairs).
pub fn pod_spec(refs: &[(ConfigKind, String, RefHow)]) -> Value {
    let mut env_from = Vec::new();
    let mut env = Vec::new();
    let mut init_env_from = Vec::new();
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for (i, (kind, name, how)) in refs.iter().enumerate() {
        let (ref_key, source) = match kind {
            ConfigKind::ConfigMap => ("configMapRef", json!({"configMap": {"name": name}})),
            ConfigKind::Secret => ("secretRef", json!({"secret": {"secretName": name}})),
        };
        match how {
            RefHow::EnvFrom => env_from.push(json!({ref_key: {"name": name}})),
            RefHow::InitEnvFrom => init_env_from.push(json!({ref_key: {"name": name}})),
            RefHow::ValueFrom => {
                let key_ref = match kind {
                    ConfigKind::ConfigMap => json!({"configMapKeyRef": {"name": name, "key": "value"}}),
                    ConfigKind::Secret => json!({"secretKeyRef": {"name": name, "key": "value"}}),
                };
                env.push(json!({"name": format!("VALUE_{i}"), "valueFrom": key_ref}));
            }
            RefHow::Volume | RefHow::Projected => {
                let vol_name = format!("v{i}");
                let volume = if *how == RefHow::Volume {
                    let mut v = source;
                    v["name"] = json!(vol_name);
                    v
                } else {
                    let proj = match kind {
                        ConfigKind::ConfigMap => json!({"configMap": {"name": name}}),
                        ConfigKind::Secret => json!({"secret": {"name": name}}),
                    };
                    json!({"name": vol_name, "projected": {"sources": [proj]}})
                };
                volumes.push(volume);
                mounts.push(json!({"name": vol_name, "mountPath": format!("/config/{i}")}));
            }
        }
    }
    let main = json!({"name": "app", "image": "busybox:1.27", "command": ["sleep", "3600"],
                      "envFrom": env_from, "env": env, "volumeMounts": mounts});
    let mut spec = json!({"containers": [main], "volumes": volumes, "terminationGracePeriodSeconds": 0});
    if !init_env_from.is_empty() {
        spec["initContainers"] =
            json!([{"name": "init", "image": "busybox:1.27", "command": ["true"], "envFrom": init_env_from}]);
    }
    spec
}

/// Creates a workload.
pub async fn create_workload(
    client: &Client,
    def: &WorkloadDef,
    namespace: &str,
    run: &str,
    refs: &[(ConfigKind, String, RefHow)],
) -> Result<(), Error> {
    let mut annotations = serde_json::Map::new();
    if let Some(lists) = def.named_lists {
        for (kind, key) in [(ConfigKind::ConfigMap, NAMED_CONFIGMAPS), (ConfigKind::Secret, NAMED_SECRETS)] {
            let entry = |n: &str| match lists {
                NamedLists::Names => format!("^{n}$"),
                NamedLists::Patterns => format!("^{n}(-v[0-9]+)?$"),
            };
            let names: Vec<String> = refs.iter().filter(|(k, ..)| *k == kind).map(|(_, n, _)| entry(n)).collect();
            if !names.is_empty() {
                annotations.insert(key.into(), json!(names.join(",")));
            }
        }
    } else {
        annotations.insert(AUTO.into(), json!("true"));
    }
    if let Some(p) = &def.pause_period {
        annotations.insert(PAUSE_PERIOD.into(), json!(p));
    }
    if def.keys_used {
        annotations.insert(RELOAD_ON.into(), json!("keys-used"));
    }
    let labels = json!({"app": def.name});
    let mut spec = json!({
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec(refs)},
    });
    if def.kind != Kind::DaemonSet {
        spec["replicas"] = json!(1);
    }
    if def.kind == Kind::StatefulSet {
        spec["serviceName"] = json!(def.name);
    }
    let obj = json!({
        "metadata": {"name": def.name, "namespace": namespace, "labels": {RUN_LABEL: run}, "annotations": annotations},
        "spec": spec,
    });
    let pp = PostParams::default();
    let what = || format!("create {:?} {namespace}/{}", def.kind, def.name);
    let ns = namespace;
    match def.kind {
        Kind::Deployment => {
            let d: Deployment = serde_json::from_value(obj)?;
            Api::<Deployment>::namespaced(client.clone(), ns).create(&pp, &d).await.map(|_| ())
        }
        Kind::StatefulSet => {
            let s: StatefulSet = serde_json::from_value(obj)?;
            Api::<StatefulSet>::namespaced(client.clone(), ns).create(&pp, &s).await.map(|_| ())
        }
        Kind::DaemonSet => {
            let d: DaemonSet = serde_json::from_value(obj)?;
            Api::<DaemonSet>::namespaced(client.clone(), ns).create(&pp, &d).await.map(|_| ())
        }
    }
    .map_err(|e| Error::kube(what(), e))
}

/// Deletes a Deployment (S5 churn).
pub async fn delete_deployment(client: &Client, namespace: &str, name: &str) -> Result<(), Error> {
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .delete(name, &DeleteParams::background())
        .await
        .map(|_| ())
        .map_err(|e| Error::kube(format!("delete deployment {namespace}/{name}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::content::hash_data;

    #[test]
    fn every_content_is_unique_and_padded() {
        let def = ConfigDef { kind: ConfigKind::ConfigMap, ns: 0, name: "cm-1".into(), pad_bytes: 20 };
        let c0 = content(&def, "ns", 0);
        assert_eq!(c0.get("value").map(String::as_str), Some("cm/ns/cm-1/0"));
        assert_eq!(c0.get("pad").map(String::as_str), Some("0123456789abcdef0123"));
        let secret = ConfigDef { kind: ConfigKind::Secret, ..def.clone() };
        assert_ne!(hash_data(&c0), hash_data(&content(&def, "ns", 1)));
        assert_ne!(hash_data(&c0), hash_data(&content(&secret, "ns", 0)));
    }

    #[test]
    fn secret_values_are_base64_on_the_wire() {
        let data = BTreeMap::from([("k".to_owned(), "test".to_owned())]);
        assert_eq!(secret_data(&data).get("k").map(String::as_str), Some("dGVzdA=="));
    }

    #[test]
    fn pod_spec_uses_every_reference_kind() {
        let refs = [
            (ConfigKind::ConfigMap, "a".to_owned(), RefHow::InitEnvFrom),
            (ConfigKind::Secret, "b".to_owned(), RefHow::ValueFrom),
            (ConfigKind::ConfigMap, "c".to_owned(), RefHow::Volume),
            (ConfigKind::Secret, "d".to_owned(), RefHow::Projected),
            (ConfigKind::ConfigMap, "e".to_owned(), RefHow::EnvFrom),
        ];
        let spec = pod_spec(&refs);
        assert_eq!(spec["initContainers"][0]["envFrom"][0]["configMapRef"]["name"], "a");
        assert_eq!(spec["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"], "b");
        assert_eq!(spec["volumes"][0], json!({"name": "v2", "configMap": {"name": "c"}}));
        assert_eq!(spec["volumes"][1]["projected"]["sources"][0]["secret"]["name"], "d");
        assert_eq!(spec["containers"][0]["envFrom"][0]["configMapRef"]["name"], "e");
        assert_eq!(spec["containers"][0]["volumeMounts"].as_array().map(Vec::len), Some(2));
    }
}
