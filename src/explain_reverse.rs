//! `reloader explain configmap/<name>` (and `secret/<name>`): the other direction of `explain` — the question
//! asked before touching a shared ConfigMap or rotating a Secret (#16, user-demand.md §1.32). Every workload of the
//! namespace that would roll out if the resource's content changed, with the controller's own reason and
//! container, and those that use it but would not (ignored, excluded, not selected), plus what the controller
//! does not look at (kind not watched, namespace out of scope). Reads only: one GET of the resource, one LIST per
//! workload kind. Prints names and reasons, never Secret data.

use std::fmt::Write as _;

use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        batch::v1::{CronJob, Job},
        core::v1::{ConfigMap, Secret},
    },
};
use kube::{Api, Client, api::ListParams};
use serde::de::DeserializeOwned;

use crate::{
    annotations::AnnotationKeys,
    controller::{Settings, Source, configmap_facts, secret_facts},
    decision::{DecisionSettings, ReloadDecision},
    explain::{ExplainError, namespace_inactive},
    index::{ConfigFacts, ConfigKey, decide_pair},
    resource::ConfigKind,
    strategy::ReloadStrategy,
    workload::{
        WorkloadKey, WorkloadKind, WorkloadObject, WorkloadSummary,
        custom::{DeploymentConfig, Rollout},
        summarise,
    },
};

/// What the controller sees around one resource.
#[derive(Clone, Debug)]
pub struct Surroundings<'a> {
    /// The resource's facts, `None` when it does not exist (decisions then assume no `ignore`/`match`).
    pub facts: Option<ConfigFacts>,
    /// The namespace's workloads of the watched kinds.
    pub workloads: &'a [(WorkloadKey, WorkloadSummary)],
    /// Workload kinds the controller does not watch (`--ignored-workload-types`, optional kinds off).
    pub unwatched: &'a [WorkloadKind],
    /// The resource's kind is not watched (`--resources-to-ignore`).
    pub kind_unwatched: bool,
    /// Why changes in the namespace are not acted on, if they are not.
    pub namespace_inactive: Option<String>,
}

/// The explanation for one resource. Pure.
pub fn explain_dependents(
    config: &ConfigKey,
    around: &Surroundings<'_>,
    settings: DecisionSettings,
    strategy: ReloadStrategy,
) -> String {
    let mut out = format!("{} {}/{}\n", config.kind, config.namespace, config.name);
    if around.facts.is_none() {
        out.push_str("  not found: decisions below assume it has no ignore/match annotation\n");
    }
    if let Some(why) = &around.namespace_inactive {
        let _ = writeln!(out, "  namespace {}: {why}; a change rolls nothing", config.namespace);
    }
    if around.kind_unwatched {
        let _ = writeln!(out, "  {}s are not watched (--resources-to-ignore): a change rolls nothing", config.kind);
    }
    let facts = around.facts.unwrap_or_else(|| ConfigFacts::live(crate::hash::ContentHash::NONE, false, false));
    let (mut rolls, mut stays) = (Vec::new(), Vec::new());
    let mut workloads: Vec<&(WorkloadKey, WorkloadSummary)> = around.workloads.iter().collect();
    workloads.sort_by(|a, b| (a.0.kind, &a.0.name).cmp(&(b.0.kind, &b.0.name)));
    for (key, summary) in workloads {
        let used = summary.uses.iter().any(|u| u.kind == config.kind && u.name == config.name);
        let named = summary.annotations.for_kind(config.kind).named.iter().any(|p| p.matches(&config.name));
        match decide_pair(summary, config, &facts, settings) {
            ReloadDecision::Reload { container, reason } => {
                rolls.push(format!("{} {}: {reason}; container {container}", key.kind, key.name));
            }
            ReloadDecision::Skip(reason) if used || named => stays.push(format!("{} {}: {reason}", key.kind, key.name)),
            ReloadDecision::Skip(_) => {}
        }
    }
    let active = around.namespace_inactive.is_none() && !around.kind_unwatched;
    let verb = if active { "would roll out" } else { "would roll out if it were watched" };
    let strategy = match strategy {
        ReloadStrategy::EnvVars => "env-vars",
        ReloadStrategy::Annotations => "annotations",
    };
    let _ = writeln!(out, "  {verb} ({}), strategy {strategy}:", rolls.len());
    for line in &rolls {
        let _ = writeln!(out, "    {line}");
    }
    let _ = writeln!(out, "  use it but would not roll out ({}):", stays.len());
    for line in &stays {
        let _ = writeln!(out, "    {line}");
    }
    for kind in around.unwatched {
        let _ = writeln!(out, "  {kind}s are not watched: never rolled");
    }
    out
}

/// Parses `configmap/cfg`, `cm/cfg`, `secret/db`; `None` for any other kind.
pub fn parse_config_target(text: &str) -> Option<(ConfigKind, String)> {
    let (kind, name) = text.split_once('/').filter(|(_, n)| !n.is_empty())?;
    let kind = match kind.to_ascii_lowercase().trim_end_matches('s') {
        "configmap" | "cm" => ConfigKind::ConfigMap,
        "secret" => ConfigKind::Secret,
        _ => return None,
    };
    Some((kind, name.to_owned()))
}

/// Reads the resource and the namespace's workloads, and explains who would roll out.
pub async fn run(
    client: &Client,
    (kind, name): (ConfigKind, String),
    namespace: &str,
    settings: &Settings,
) -> Result<String, ExplainError> {
    let keys = &settings.keys;
    let config = ConfigKey { kind, namespace: namespace.into(), name: name.clone() };
    let facts = match kind {
        ConfigKind::ConfigMap => {
            fetch::<ConfigMap>(client, namespace, &name).await?.and_then(|c| configmap_facts(&c, keys))
        }
        _ => fetch::<Secret>(client, namespace, &name).await?.and_then(|s| secret_facts(&s, keys)),
    }
    .map(|(_, f)| f);
    let mut workloads = Vec::new();
    let mut unwatched = Vec::new();
    for kind in WorkloadKind::ALL {
        if !settings.watch.sources.contains(&Source::Workload(kind)) && !optional_on(settings, kind) {
            unwatched.push(kind);
            continue;
        }
        let found = match kind {
            WorkloadKind::Deployment => list::<Deployment>(client, namespace, keys).await,
            WorkloadKind::StatefulSet => list::<StatefulSet>(client, namespace, keys).await,
            WorkloadKind::DaemonSet => list::<DaemonSet>(client, namespace, keys).await,
            WorkloadKind::CronJob => list::<CronJob>(client, namespace, keys).await,
            WorkloadKind::Job => list::<Job>(client, namespace, keys).await,
            WorkloadKind::Rollout => list::<Rollout>(client, namespace, keys).await,
            WorkloadKind::DeploymentConfig => list::<DeploymentConfig>(client, namespace, keys).await,
        };
        match found {
            Ok(found) => workloads.extend(found),
            // An optional kind whose API is not served here has no workloads to explain.
            Err(kube::Error::Api(s))
                if s.code == 404 && matches!(kind, WorkloadKind::Rollout | WorkloadKind::DeploymentConfig) => {}
            Err(source) => return Err(ExplainError::Api { what: format!("listing {kind}s"), source }),
        }
    }
    let around = Surroundings {
        facts,
        workloads: &workloads,
        unwatched: &unwatched,
        kind_unwatched: !settings.watch.config_kinds().contains(&kind),
        namespace_inactive: namespace_inactive(client, namespace, settings).await?,
    };
    Ok(explain_dependents(&config, &around, settings.decisions, settings.strategy))
}

fn optional_on(settings: &Settings, kind: WorkloadKind) -> bool {
    settings.optional.iter().any(|o| o.sources.contains(&Source::Workload(kind)))
}

async fn fetch<K>(client: &Client, namespace: &str, name: &str) -> Result<Option<K>, ExplainError>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| ExplainError::Api { what: format!("reading {} {namespace}/{name}", K::kind(&())), source })
}

async fn list<K>(
    client: &Client,
    namespace: &str,
    keys: &AnnotationKeys,
) -> Result<Vec<(WorkloadKey, WorkloadSummary)>, kube::Error>
where
    K: WorkloadObject + kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()> + DeserializeOwned,
    K: Clone + std::fmt::Debug,
{
    let objects = Api::<K>::namespaced(client.clone(), namespace).list(&ListParams::default()).await?;
    Ok(objects.items.iter().filter_map(|o| summarise(o, keys)).collect())
}

#[cfg(test)]
#[path = "explain_reverse_tests.rs"]
mod tests;
