//! Content hashes and the reload marks a controller leaves on a pod template.
//!
//! The bench computes upstream's hash (reloader-behaviour.md §3.1) of every content it writes, so a
//! `STAKATER_*` value or a `last-reloaded-from` hash seen on a workload names the exact update that caused it.
//! This is the bench's own implementation of the spec, independent of the controller under test.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use sha1::{Digest as _, Sha1};

/// Prefix of the env vars the env-vars strategy writes.
pub const ENV_PREFIX: &str = "STAKATER_";
/// Pod-template annotation the annotations strategy writes.
pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// Upstream's hash of a ConfigMap `data` map or a Secret's decoded `data`: `k=v` entries sorted byte-wise,
/// joined with `;`, SHA-1, lower-case hex.
pub fn hash_data(data: &BTreeMap<String, String>) -> String {
    let mut entries: Vec<String> = data.iter().map(|(k, v)| format!("{k}={v}")).collect();
    entries.sort_unstable();
    let digest = Sha1::digest(entries.join(";").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The reload marks on a pod template: mark key → hash. Keys are `<container>/<env var>` for `STAKATER_*` env
/// vars (containers and init containers) and the annotation key for `last-reloaded-from` (its JSON `hash`
/// field, upstream v1 and v2 shapes alike).
pub fn reload_marks(template: &PodTemplateSpec) -> BTreeMap<String, String> {
    let mut marks = BTreeMap::new();
    if let Some(spec) = &template.spec {
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        for c in containers {
            for e in c.env.iter().flatten() {
                if let (true, Some(v)) = (e.name.starts_with(ENV_PREFIX), &e.value) {
                    marks.insert(format!("{}/{}", c.name, e.name), v.clone());
                }
            }
        }
    }
    let annotation = template.metadata.as_ref().and_then(|m| m.annotations.as_ref()?.get(LAST_RELOADED_FROM));
    if let Some(text) = annotation {
        marks.insert(LAST_RELOADED_FROM.to_owned(), annotation_hash(text).unwrap_or_else(|| text.clone()));
    }
    marks
}

/// The `hash` field of a `last-reloaded-from` annotation value, `None` when it is not that JSON.
pub fn annotation_hash(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("hash")?.as_str().map(str::to_owned)
}

/// Mark keys whose value differs between two snapshots (new or changed; removals are not reloads), with the
/// new value.
pub fn changed_marks(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<(String, String)> {
    after.iter().filter(|(k, v)| before.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn hashes_match_upstream_test_vectors() {
        assert_eq!(hash_data(&map(&[("key", "value")])), "dc30e0faa89a70dec1033016a2309bbeb9efcbd0");
        assert_eq!(hash_data(&map(&[("a", "1"), ("b", "2")])), "f83e99e324ba68ccc373a58ef1eb42f8ab88646a");
        assert_eq!(hash_data(&BTreeMap::new()), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn marks_come_from_env_vars_of_all_containers_and_the_annotation() {
        let template: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"annotations": {LAST_RELOADED_FROM:
                r#"{"type":"CONFIGMAP","name":"a","namespace":"n","hash":"abc","containerRefs":["c"],"observedAt":1}"#}},
            "spec": {
                "initContainers": [{"name": "init", "env": [{"name": "STAKATER_B_SECRET", "value": "h2"}]}],
                "containers": [{"name": "c", "env": [
                    {"name": "STAKATER_A_CONFIGMAP", "value": "h1"},
                    {"name": "OTHER", "value": "x"},
                    {"name": "STAKATER_FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                ]}]
            }
        }))
        .expect("template literal");
        let marks = reload_marks(&template);
        assert_eq!(
            marks,
            map(&[("c/STAKATER_A_CONFIGMAP", "h1"), ("init/STAKATER_B_SECRET", "h2"), (LAST_RELOADED_FROM, "abc")])
        );
    }

    #[test]
    fn v2_annotation_shape_and_garbage_are_handled() {
        assert_eq!(
            annotation_hash(r#"{"kind":"configmap","name":"a","hash":"h9","reloadedAt":"x"}"#).as_deref(),
            Some("h9")
        );
        assert_eq!(annotation_hash("not json"), None);
    }

    #[test]
    fn changed_marks_lists_new_and_changed_values_only() {
        let before = map(&[("a", "1"), ("b", "2"), ("gone", "3")]);
        let after = map(&[("a", "1"), ("b", "5"), ("c", "7")]);
        assert_eq!(changed_marks(&before, &after), vec![("b".into(), "5".into()), ("c".into(), "7".into())]);
    }
}
