//! How a reload is written into a pod template, byte-identical to upstream (reloader-behaviour.md §3.2–§3.3),
//! and how the hashes a template already carries are read back. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::constants::annotation::{LAST_RELOADED_FROM, RESTARTED_AT};
use crate::rules::{
    hash::ContentHash,
    keys::KindFacts,
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

/// `--rollout-strategy` and `reloader.stakater.com/rollout-strategy`: what a reload writes to make the pods roll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RolloutStrategy {
    /// The reload strategy's mark in the pod template (`STAKATER_*` env var or `last-reloaded-from`).
    #[default]
    #[value(name = "rollout")]
    Rollout,
    /// `kubectl rollout restart`'s own mark: `kubectl.kubernetes.io/restartedAt` on the pod template (Argo
    /// Rollouts: `spec.restartAt`), so a GitOps diff shows a restart; the hashes live in the `applied-hashes`
    /// record only.
    #[value(name = "restart")]
    Restart,
    /// The template is not touched: the workload's pods are evicted through the Eviction API one at a time
    /// (PodDisruptionBudgets respected), for kinds whose template an operator owns (`crate::rules::pod_restarts`).
    #[value(name = "evict-pods")]
    EvictPods,
    /// As `evict-pods`, with a plain delete where eviction is not wanted.
    #[value(name = "delete-pods")]
    DeletePods,
}

impl RolloutStrategy {
    /// The annotation's value, as upstream v2 reads it for Argo Rollouts (`restart`; `rollout` or absent: the
    /// default).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "rollout" => Some(Self::Rollout),
            "restart" => Some(Self::Restart),
            "evict-pods" => Some(Self::EvictPods),
            "delete-pods" => Some(Self::DeletePods),
            _ => None,
        }
    }

    /// The name logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rollout => "rollout",
            Self::Restart => "restart",
            Self::EvictPods => "evict-pods",
            Self::DeletePods => "delete-pods",
        }
    }

    /// It restarts pods instead of writing the template.
    pub fn restarts_pods(self) -> bool {
        matches!(self, Self::EvictPods | Self::DeletePods)
    }

    /// What a workload of a kind with these facts asking for this strategy gets: where pods run to completion a
    /// reload starts a run (CronJobs spawn a Job, Jobs are recreated) and a template is written only where pods
    /// roll out; `restart` needs a kind whose rollouts are tracked; a kind without a pod template
    /// (`--workload-kind …=-`) can only have its pods restarted.
    pub fn for_kind(self, kind: &KindFacts) -> Self {
        match self {
            Self::DeletePods if !kind.has_pod_template => Self::DeletePods,
            _ if !kind.has_pod_template => Self::EvictPods,
            Self::Restart if kind.tracks_rollouts => Self::Restart,
            s if s.restarts_pods() && !kind.runs_to_completion => s,
            _ => Self::Rollout,
        }
    }
}

/// `kubectl rollout restart`'s pod-template fragment for a reload triggered at `at`.
pub fn restart_template_patch(at: jiff::Timestamp) -> Value {
    json!({"metadata": {"annotations": {RESTARTED_AT: restarted_at(at)}}})
}

/// The `restartedAt` value for a reload triggered at `at`: RFC 3339 in UTC to the millisecond. `kubectl rollout
/// restart` writes whole seconds, but two changes within a second would then write the same mark and the second
/// would roll nothing (pods started between them may have read the first content); a retry of one change writes
/// the same mark again (`at` is fixed when the change is queued).
pub fn restarted_at(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Argo's `spec.restartAt` for a reload triggered at `at`: whole seconds, as Argo writes and compares it with its
/// pods' creation times (which have seconds only: a finer value would restart the pods created in its second
/// twice).
pub fn argo_restart_at(at: jiff::Timestamp) -> String {
    jiff::Timestamp::from_second(at.as_second()).map(|t| t.to_string()).unwrap_or_default()
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
    /// The resource was deleted: the env var is removed (env-vars) or the delete marker recorded (annotations).
    pub deleted: bool,
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
                let env = env_var_name(c.kind, &c.name);
                // Strategic merge: env entries merge by name; `$patch: delete` removes one (upstream v1 removes the
                // variable of a deleted resource).
                let entry = if c.deleted {
                    json!({"name": env, "$patch": "delete"})
                } else {
                    json!({"name": env, "value": c.hash.to_string()})
                };
                per_container.entry(c.container.as_str()).or_default().push(entry);
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

/// Applies the same change as [`template_patch`] to a full pod template (for kinds that are recreated rather
/// than patched: a Job from a CronJob, a recreated Job).
pub fn apply_to_template(
    template: &mut PodTemplateSpec,
    strategy: ReloadStrategy,
    changes: &[TemplateChange],
    now_unix: i64,
) {
    match strategy {
        ReloadStrategy::EnvVars => {
            let Some(spec) = template.spec.as_mut() else { return };
            for c in changes {
                let Some(container) = spec.containers.iter_mut().find(|k| k.name == c.container) else { continue };
                let name = env_var_name(c.kind, &c.name);
                let env = container.env.get_or_insert_with(Vec::new);
                env.retain(|e| e.name != name);
                if !c.deleted {
                    env.push(EnvVar { name, value: Some(c.hash.to_string()), value_from: None });
                }
            }
        }
        ReloadStrategy::Annotations => {
            if let Some(Value::String(text)) = template_patch(strategy, changes, now_unix).pointer(POINTER) {
                let meta = template.metadata.get_or_insert_with(Default::default);
                meta.annotations
                    .get_or_insert_with(Default::default)
                    .insert(LAST_RELOADED_FROM.to_owned(), text.clone());
            }
        }
    }
}

/// Applies the same change as [`template_patch`] to a pod template held as JSON, keeping every field this
/// binary does not know (custom resources are written back whole).
pub fn apply_to_template_json(
    template: &mut Value,
    strategy: ReloadStrategy,
    changes: &[TemplateChange],
    now_unix: i64,
) {
    if !template.is_object() {
        *template = json!({});
    }
    match strategy {
        ReloadStrategy::EnvVars => {
            for c in changes {
                let Some(containers) = template.pointer_mut("/spec/containers").and_then(Value::as_array_mut) else {
                    return;
                };
                // A container without a name (Knative's, before its webhook names it) is the one named "".
                let named = |k: &&mut Value| k["name"].as_str().unwrap_or_default() == c.container;
                let Some(container) = containers.iter_mut().find(named) else {
                    continue;
                };
                let name = env_var_name(c.kind, &c.name);
                if !container["env"].is_array() {
                    container["env"] = json!([]);
                }
                if let Some(env) = container["env"].as_array_mut() {
                    env.retain(|e| e["name"] != name.as_str());
                    if !c.deleted {
                        env.push(json!({"name": name, "value": c.hash.to_string()}));
                    }
                }
            }
        }
        ReloadStrategy::Annotations => {
            if let Some(text) = template_patch(strategy, changes, now_unix).pointer(POINTER).cloned() {
                if !template["metadata"].is_object() {
                    template["metadata"] = json!({});
                }
                if !template["metadata"]["annotations"].is_object() {
                    template["metadata"]["annotations"] = json!({});
                }
                template["metadata"]["annotations"][LAST_RELOADED_FROM] = text;
            }
        }
    }
}

const POINTER: &str = "/metadata/annotations/reloader.stakater.com~1last-reloaded-from";

/// The `applied-hashes` metadata record: `{"configmap/<name>": "<sha1>", "secret/<name>": …}`.
pub fn encode_applied_hashes(hashes: &BTreeMap<(ConfigKind, String), ContentHash>) -> String {
    let map: BTreeMap<String, String> =
        hashes.iter().map(|((kind, name), hash)| (format!("{}/{name}", kind.v2_kind()), hash.to_string())).collect();
    serde_json::to_string(&map).unwrap_or_default()
}

/// Bytes one entry adds to an encoded `applied-hashes` record: `"kind/name":"<40 hex>",`. Kubernetes names
/// need no JSON escaping.
pub fn applied_hashes_entry_len((kind, name): &(ConfigKind, String)) -> usize {
    kind.v2_kind().len() + 1 + name.len() + 46
}

/// Parses an `applied-hashes` record; malformed entries are skipped (the record is only a memory aid).
pub fn parse_applied_hashes(text: &str) -> BTreeMap<(ConfigKind, String), ContentHash> {
    let map: BTreeMap<String, String> = serde_json::from_str(text).unwrap_or_default();
    map.into_iter()
        .filter_map(|(key, hash)| {
            let (kind, name) = key.split_once('/')?;
            Some(((ConfigKind::from_upstream(kind)?, name.to_owned()), ContentHash::parse_hex(&hash)?))
        })
        .collect()
}

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
#[path = "strategy_tests.rs"]
mod tests;
