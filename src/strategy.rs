//! How a reload is written into a pod template, byte-identical to upstream (reloader-behaviour.md §3.2–§3.3),
//! and how the hashes a template already carries are read back. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    constants::annotation::LAST_RELOADED_FROM,
    hash::ContentHash,
    resource::{ConfigKind, env_var_name},
};

/// `--reload-strategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReloadStrategy {
    /// Set `STAKATER_<NAME>_<KIND>=<hash>` on the container using the resource (upstream default).
    #[default]
    #[value(name = "env-vars")]
    EnvVars,
    /// Set the pod-template annotation `reloader.stakater.com/last-reloaded-from`.
    #[value(name = "annotations")]
    Annotations,
}

/// One resource's new hash to write into a workload's pod template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateChange {
    /// Resource kind.
    pub kind: ConfigKind,
    /// Resource name.
    pub name: String,
    /// Resource namespace.
    pub namespace: String,
    /// The hash to record.
    pub hash: ContentHash,
    /// The container that receives the env var.
    pub container: String,
}

/// upstream v1 `ReloadSource`, fields in upstream's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReloadSourceV1<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    name: &'a str,
    namespace: &'a str,
    hash: String,
    container_refs: [&'a str; 1],
    observed_at: i64,
}

/// The pod-template fragment (`{"metadata":…}` or `{"spec":…}`) that records `changes`. Env vars are grouped
/// per container so a strategic merge patch (containers merged by name, env by name) writes them all at once.
/// The annotations strategy stores one source only (upstream's shape); it records the last change.
pub fn template_patch(strategy: ReloadStrategy, changes: &[TemplateChange], now_unix: i64) -> Value {
    match strategy {
        ReloadStrategy::EnvVars => {
            let mut per_container: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
            for c in changes {
                per_container
                    .entry(c.container.as_str())
                    .or_default()
                    .push(json!({"name": env_var_name(c.kind, &c.name), "value": c.hash.to_string()}));
            }
            let containers: Vec<Value> =
                per_container.into_iter().map(|(name, env)| json!({"name": name, "env": env})).collect();
            json!({"spec": {"containers": containers}})
        }
        ReloadStrategy::Annotations => {
            let Some(c) = changes.last() else {
                return json!({});
            };
            let source = ReloadSourceV1 {
                type_: c.kind.upstream_type(),
                name: &c.name,
                namespace: &c.namespace,
                hash: c.hash.to_string(),
                container_refs: [&c.container],
                observed_at: now_unix,
            };
            let text = serde_json::to_string(&source).unwrap_or_default();
            json!({"metadata": {"annotations": {LAST_RELOADED_FROM: text}}})
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]

/// Both upstream shapes of `last-reloaded-from`: v1 `type`, v2 `kind`.
#[derive(Deserialize)]
struct LastReloadedFrom {
    #[serde(alias = "kind", rename = "type")]
    type_: String,
    name: String,
    hash: String,
}

/// Parses a `last-reloaded-from` value in either upstream shape.
pub fn parse_last_reloaded_from(text: &str) -> Option<(ConfigKind, String, ContentHash)> {
    let v: LastReloadedFrom = serde_json::from_str(text).ok()?;
    Some((ConfigKind::from_upstream(&v.type_)?, v.name, ContentHash::parse_hex(&v.hash)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: ConfigKind, name: &str, container: &str, hash: &str) -> TemplateChange {
        TemplateChange {
            kind,
            name: name.into(),
            namespace: "ns".into(),
            hash: ContentHash::parse_hex(hash).expect("hex"),
            container: container.into(),
        }
    }

    const H1: &str = "dc30e0faa89a70dec1033016a2309bbeb9efcbd0";
    const H2: &str = "f83e99e324ba68ccc373a58ef1eb42f8ab88646a";

    #[test]
    fn env_vars_patch_matches_upstreams_strategic_merge_shape() {
        let p = template_patch(ReloadStrategy::EnvVars, &[change(ConfigKind::ConfigMap, "my-config", "app", H1)], 0);
        assert_eq!(
            p,
            json!({"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_MY_CONFIG_CONFIGMAP", "value": H1}]}]}})
        );
    }

    #[test]
    fn several_changes_become_one_patch_grouped_by_container() {
        let p = template_patch(
            ReloadStrategy::EnvVars,
            &[
                change(ConfigKind::ConfigMap, "a", "app", H1),
                change(ConfigKind::Secret, "b", "side", H2),
                change(ConfigKind::Secret, "c", "app", H2),
            ],
            0,
        );
        assert_eq!(
            p,
            json!({"spec": {"containers": [
                {"name": "app", "env": [{"name": "STAKATER_A_CONFIGMAP", "value": H1}, {"name": "STAKATER_C_SECRET", "value": H2}]},
                {"name": "side", "env": [{"name": "STAKATER_B_SECRET", "value": H2}]}
            ]}})
        );
    }

    #[test]
    fn annotations_patch_is_upstream_v1_json_in_field_order() {
        let p =
            template_patch(ReloadStrategy::Annotations, &[change(ConfigKind::Secret, "db", "app", H1)], 1_700_000_000);
        let expected = format!(
            r#"{{"type":"SECRET","name":"db","namespace":"ns","hash":"{H1}","containerRefs":["app"],"observedAt":1700000000}}"#
        );
        assert_eq!(p, json!({"metadata": {"annotations": {LAST_RELOADED_FROM: expected}}}));
    }

    #[test]
    fn last_reloaded_from_parses_both_upstream_shapes() {
        let v1 = format!(
            r#"{{"type":"CONFIGMAP","name":"a","namespace":"ns","hash":"{H1}","containerRefs":["c"],"observedAt":1}}"#
        );
        let v2 = format!(
            r#"{{"kind":"secret","name":"b","namespace":"ns","hash":"{H2}","containers":["c"],"reloadedAt":"2026-01-01T00:00:00Z"}}"#
        );
        assert_eq!(
            parse_last_reloaded_from(&v1),
            Some((ConfigKind::ConfigMap, "a".into(), ContentHash::parse_hex(H1).expect("hex")))
        );
        assert_eq!(
            parse_last_reloaded_from(&v2),
            Some((ConfigKind::Secret, "b".into(), ContentHash::parse_hex(H2).expect("hex")))
        );
        assert_eq!(parse_last_reloaded_from("not json"), None);
        assert_eq!(
            parse_last_reloaded_from(r#"{"kind":"secret","name":"b","hash":""}"#),
            None,
            "v2 delete marker records no hash"
        );
    }
}
