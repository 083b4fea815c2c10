//! `reloader explain <kind>/<name>`: which ConfigMaps and Secrets reload one workload and why, and whether
//! the controller would roll it out right now. It runs the controller's own decision ([`decide_pair`]) and
//! first-sight rules (the [`Index`] with the baseline a (re)started controller uses), so its answer is the
//! controller's: "what would restart?" (user-demand.md §1.32) and "would a controller restart roll this?" (§1.3).
//! Reads only: one GET of the workload, one LIST of the namespace's ConfigMaps and Secrets. Prints resource
//! names, hashes and annotation values, never Secret data.

use std::fmt::Write as _;

use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        batch::v1::{CronJob, Job},
        core::v1::Namespace,
    },
};
use kube::{Api, Client, api::ListParams};
use serde::de::DeserializeOwned;

use crate::{
    annotations::AnnotationKeys,
    config::WatchScope,
    controller::{Settings, configmap_facts, secret_facts},
    decision::{DecisionSettings, ReloadDecision},
    hash::ContentHash,
    index::{Baseline, ConfigFacts, ConfigKey, Index, decide_pair},
    resource::ConfigKind,
    strategy::ReloadStrategy,
    workload::{
        WorkloadKey, WorkloadKind, WorkloadObject, WorkloadSummary,
        custom::{DeploymentConfig, Rollout},
        summarise,
    },
};

/// Why `explain` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The argument is not `<kind>/<name>` with a known kind.
    #[error(
        "{0:?} is not <kind>/<name>; kinds: deployment, statefulset, daemonset, cronjob, job, rollout, deploymentconfig, configmap, secret"
    )]
    Target(String),
    /// Reading from the cluster failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
}

/// Parses `deployment/web` (kind names as kubectl spells them, short names included).
pub fn parse_target(text: &str) -> Result<(WorkloadKind, String), ExplainError> {
    let bad = || ExplainError::Target(text.to_owned());
    let (kind, name) = text.split_once('/').filter(|(_, n)| !n.is_empty()).ok_or_else(bad)?;
    let kind = match kind.to_ascii_lowercase().trim_end_matches('s') {
        "deployment" | "deploy" => WorkloadKind::Deployment,
        "statefulset" | "st" => WorkloadKind::StatefulSet,
        "daemonset" | "d" => WorkloadKind::DaemonSet,
        "cronjob" | "cj" => WorkloadKind::CronJob,
        "job" => WorkloadKind::Job,
        "rollout" | "ro" => WorkloadKind::Rollout,
        "deploymentconfig" | "dc" => WorkloadKind::DeploymentConfig,
        _ => return Err(bad()),
    };
    Ok((kind, name.to_owned()))
}

/// What the controller sees of one workload's namespace.
#[derive(Clone, Debug)]
pub struct Visible<'a> {
    /// Why changes in the namespace are not acted on, if they are not (scope, ignore list, selector).
    pub namespace_inactive: Option<String>,
    /// The namespace's ConfigMaps and Secrets of the watched kinds.
    pub configs: &'a [(ConfigKey, ConfigFacts)],
    /// The watched kinds (`--resources-to-ignore` removes one).
    pub watched: &'a [ConfigKind],
    /// What a controller starting now assumes a workload without a record runs with (`--sync-after-restart`:
    /// nothing, so it rolls).
    pub start: Baseline,
    /// `--hash-key-secret`'s key: Secret values on templates are keyed by it.
    pub hash_key: Option<&'a crate::hash_key::HashKey>,
}

/// The explanation of one workload, given its summary and what the controller sees of its namespace. Pure.
pub fn explain(
    key: &WorkloadKey,
    summary: &WorkloadSummary,
    visible: &Visible<'_>,
    settings: DecisionSettings,
    strategy: ReloadStrategy,
) -> String {
    let &Visible { ref namespace_inactive, configs, watched, start, hash_key } = visible;
    let mut out = format!("{} {}/{}\n", key.kind, key.namespace, key.name);
    if let Some(why) = namespace_inactive {
        let _ = writeln!(out, "  namespace {}: {why}; no change in it reloads anything", key.namespace);
    }
    for problem in &summary.annotations.problems {
        let _ = writeln!(out, "  problem: {}", problem.message);
    }
    for kind in [ConfigKind::ConfigMap, ConfigKind::Secret] {
        if !watched.contains(&kind) {
            let _ = writeln!(out, "  {kind}s are not watched (--resources-to-ignore): they never reload it");
        }
    }
    let mut sorted: Vec<&(ConfigKey, ConfigFacts)> = configs.iter().collect();
    sorted.sort_by(|a, b| (a.0.kind, &a.0.name).cmp(&(b.0.kind, &b.0.name)));
    for (config, facts) in sorted {
        let used = summary.uses.iter().any(|u| u.kind == config.kind && u.name == config.name);
        match decide_pair(summary, config, facts, settings) {
            ReloadDecision::Reload { container, reason } => {
                let _ = writeln!(
                    out,
                    "  {} {}: reloads on change ({reason}; container {container})",
                    config.kind, config.name
                );
            }
            ReloadDecision::Skip(reason) if used => {
                let _ = writeln!(out, "  {} {}: does not reload ({reason})", config.kind, config.name);
            }
            ReloadDecision::Skip(_) => {}
        }
    }
    for used in &summary.uses {
        let found = configs.iter().any(|(c, _)| c.kind == used.kind && c.name == used.name);
        if watched.contains(&used.kind) && !found {
            let _ = writeln!(out, "  {} {}: used by the pod spec but not found", used.kind, used.name);
        }
    }
    if namespace_inactive.is_some() {
        return out;
    }
    let mut index = Index::default();
    index.set_hash_key(hash_key.cloned());
    for (config, facts) in configs {
        index.upsert_config(config.clone(), *facts, start);
    }
    index.upsert_workload(key.clone(), summary.clone(), start);
    let plan = index.plan(key, settings, strategy);
    if plan.reloads.is_empty() {
        out.push_str("  now: up to date; a controller starting now would not roll it out\n");
    }
    for r in &plan.reloads {
        let recorded = if r.previous == ContentHash::NONE { "no hash".to_owned() } else { r.previous.to_string() };
        let _ = writeln!(
            out,
            "  now: would roll out for {} {}: the workload records {recorded}, the content is {}",
            r.config.kind, r.config.name, r.value
        );
    }
    out
}

/// Reads the workload (from [`parse_target`]) and its namespace's ConfigMaps and Secrets, and explains it.
pub async fn run(
    client: &Client,
    (kind, name): (WorkloadKind, String),
    namespace: &str,
    settings: &Settings,
) -> Result<String, ExplainError> {
    let keys = &settings.keys;
    let (key, summary) = match kind {
        WorkloadKind::Deployment => fetch::<Deployment>(client, namespace, &name, keys).await?,
        WorkloadKind::StatefulSet => fetch::<StatefulSet>(client, namespace, &name, keys).await?,
        WorkloadKind::DaemonSet => fetch::<DaemonSet>(client, namespace, &name, keys).await?,
        WorkloadKind::CronJob => fetch::<CronJob>(client, namespace, &name, keys).await?,
        WorkloadKind::Job => fetch::<Job>(client, namespace, &name, keys).await?,
        WorkloadKind::Rollout => fetch::<Rollout>(client, namespace, &name, keys).await?,
        WorkloadKind::DeploymentConfig => fetch::<DeploymentConfig>(client, namespace, &name, keys).await?,
    };
    let watched = settings.watch.config_kinds();
    // Only what the controller would see: the watched kinds, filtered by `--resource-label-selector`.
    let params = match &settings.watch.resource_label_selector {
        Some(selector) => ListParams::default().labels(selector),
        None => ListParams::default(),
    };
    let mut configs = Vec::new();
    if watched.contains(&ConfigKind::ConfigMap) {
        configs.extend(list(client, namespace, &params, keys, configmap_facts).await?);
    }
    if watched.contains(&ConfigKind::Secret) {
        configs.extend(list(client, namespace, &params, keys, secret_facts).await?);
    }
    let namespace_inactive = namespace_inactive(client, namespace, settings).await?;
    let start = if settings.sync_after_restart { Baseline::Stale } else { Baseline::Current };
    let hash_key = settings.hash_key.as_ref();
    let visible = Visible { namespace_inactive, configs: &configs, watched: &watched, start, hash_key };
    Ok(explain(&key, &summary, &visible, settings.decisions, settings.strategy))
}

/// Why the controller does not act on changes in `namespace` (as the observer decides: scope, then
/// `--namespaces-to-ignore`, then `--namespace-selector` evaluated by the API server).
pub(crate) async fn namespace_inactive(
    client: &Client,
    namespace: &str,
    settings: &Settings,
) -> Result<Option<String>, ExplainError> {
    if let WatchScope::Namespaces(list) = &settings.watch.scope
        && !list.iter().any(|n| n == namespace)
    {
        return Ok(Some(format!("not watched (the controller watches only {})", list.join(", "))));
    }
    if settings.namespaces_to_ignore.iter().any(|n| n == namespace) {
        return Ok(Some("ignored (--namespaces-to-ignore)".to_owned()));
    }
    let Some(selector) = &settings.watch.namespace_selector else { return Ok(None) };
    let params = ListParams::default().labels(selector).fields(&format!("metadata.name={namespace}"));
    let matching = Api::<Namespace>::all(client.clone())
        .list_metadata(&params)
        .await
        .map_err(|source| ExplainError::Api { what: "listing namespaces".into(), source })?;
    Ok(matching.items.is_empty().then(|| format!("does not match --namespace-selector {selector}")))
}

async fn fetch<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    keys: &AnnotationKeys,
) -> Result<(WorkloadKey, WorkloadSummary), ExplainError>
where
    K: WorkloadObject + kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()> + DeserializeOwned,
    K: Clone + std::fmt::Debug,
{
    let what = format!("reading {} {namespace}/{name}", K::KIND);
    let obj = Api::<K>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|source| ExplainError::Api { what: what.clone(), source })?;
    summarise(&obj, keys).ok_or_else(|| ExplainError::Target(format!("{namespace}/{name} has no namespace")))
}

async fn list<K>(
    client: &Client,
    namespace: &str,
    params: &ListParams,
    keys: &AnnotationKeys,
    facts: fn(&K, &AnnotationKeys) -> Option<(ConfigKey, ConfigFacts)>,
) -> Result<Vec<(ConfigKey, ConfigFacts)>, ExplainError>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    let objects = Api::<K>::namespaced(client.clone(), namespace)
        .list(params)
        .await
        .map_err(|source| ExplainError::Api { what: format!("listing {}", K::plural(&())), source })?;
    Ok(objects.items.iter().filter_map(|o| facts(o, keys)).collect())
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
