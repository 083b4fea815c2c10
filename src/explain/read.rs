//! The reading half of `explain`: what the controller would see, fetched once (one GET of the target, one LIST
//! per kind it needs), handed to the pure functions in [`super`] and [`super::reverse`].

use futures::future::BoxFuture;
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{ConfigMap, Namespace, Secret},
};
use kube::{Api, Client, api::ListParams};
use serde::de::DeserializeOwned;

use super::{
    ExplainError, GateFacts, Visible, WorkloadExplanation, explain,
    preview::{self, Content},
    reverse::{Dependents, Surroundings, explain_dependents, plural},
};
use crate::rules::{
    annotations::AnnotationKeys, csi::SecretProviderClass, hash::ContentHash, references::KeySet, resource::ConfigKind,
};
use crate::{
    config::WatchScope,
    controller::{NamespaceValues, Settings, Source, config_flags, configmap_facts, secret_facts},
    index::{Baseline, ConfigFacts, ConfigKey, KeyView, configmap_views, secret_views},
    workload::{
        WorkloadKey, WorkloadKind, WorkloadObject, WorkloadSummary,
        kinds::{KindVisitor, visit},
        summarise,
    },
};

/// Reads the workload and its namespace's ConfigMaps and Secrets, and explains it.
pub async fn workload(
    client: &Client,
    (kind, name): (WorkloadKind, String),
    namespace: &str,
    settings: &Settings,
) -> Result<WorkloadExplanation, ExplainError> {
    let keys = &settings.keys;
    let found = visit(kind, GetWorkload { client, namespace, name: &name, keys }).await?;
    let (key, mut summary) =
        found.ok_or_else(|| ExplainError::Target(format!("{namespace}/{name} has no namespace")))?;
    if !kind.facts().has_pod_template {
        // A kind without a pod template (`--workload-kind …=-`): what its pods use, as the controller reads it.
        let read = crate::workload::pod_uses(client, &key).await;
        let read = read.map_err(|source| ExplainError::Api { what: format!("reading the pods of {key}"), source })?;
        (summary.uses, summary.first_container) = (read.uses, read.first_container);
    }
    let (windows, rules) = (settings.watch.namespace_windows, settings.watch.namespace_rules);
    let namespace_values =
        if windows || rules { namespace_values(client, namespace, keys).await? } else { Default::default() };
    if windows && summary.annotations.gates.window.is_none() {
        // An invalid window is none, as for the controller.
        let window = namespace_values.window.as_deref().and_then(|v| crate::rules::window::ReloadWindow::parse(v).ok());
        summary.annotations.gates.window = window;
    }
    let rules = if rules { namespace_values.rules() } else { Default::default() };
    summary.annotations.gates.namespace_paused = rules.pause;
    let decisions = crate::rules::decision::DecisionSettings { namespace: rules, ..settings.decisions };
    let watched = settings.watch.config_kinds();
    // Only what the controller would see: the watched kinds, filtered by `--resource-label-selector`.
    let params = match &settings.watch.resource_label_selector {
        Some(selector) => ListParams::default().labels(selector),
        None => ListParams::default(),
    };
    // Key-level: the key sets the workload reads, whose views the controller would compare.
    let wanted: Vec<(ConfigKey, KeySet)> = summary
        .uses
        .iter()
        .filter(|_| summary.annotations.keys_used.unwrap_or(settings.decisions.keys_used))
        .filter_map(|u| {
            let config = ConfigKey { kind: u.kind, namespace: namespace.into(), name: u.name.clone() };
            Some((config, u.keys.clone()?))
        })
        .collect();
    let (mut configs, mut views) = (Vec::new(), Vec::new());
    if watched.contains(&ConfigKind::ConfigMap) {
        let read = (configmap_facts as FactsFn<ConfigMap>, configmap_views as ViewsFn<ConfigMap>);
        list_facts(client, namespace, &params, keys, read, &wanted, (&mut configs, &mut views)).await?;
    }
    if watched.contains(&ConfigKind::Secret) {
        let read = (secret_facts as FactsFn<Secret>, secret_views as ViewsFn<Secret>);
        list_facts(client, namespace, &params, keys, read, &wanted, (&mut configs, &mut views)).await?;
    }
    // `<namespace>/<name>` entries: the resources they name in other namespaces, allowed or refused by their
    // consent. Without the flag they are not read: `explain` shows them refused as the controller does.
    if settings.decisions.cross_namespace {
        configs.extend(remote_facts(client, &summary, namespace, &params, keys, &watched).await?);
    }
    let namespace_inactive = namespace_inactive(client, namespace, settings).await?;
    let start = if settings.sync_after_restart { Baseline::Stale } else { Baseline::Current };
    let hash_key = settings.hash_key.as_ref();
    // Rollout gates (issue 17): the workloads the same changes roll, for waves and the health gate.
    let gated = !summary.annotations.gates.is_default() || settings.halt_on_failed_rollout;
    let peers = if gated { list_workloads(client, Some(namespace), settings).await?.0 } else { Vec::new() };
    let gates = GateFacts {
        peers: &peers,
        halt_default: settings.halt_on_failed_rollout,
        budget: settings.rollout_budget.0,
        now: jiff::Timestamp::now(),
    };
    let visible =
        Visible { namespace_inactive, configs: &configs, watched: &watched, start, hash_key, views: &views, gates };
    Ok(explain(&key, &summary, &visible, decisions, settings.strategy))
}

/// Reads the resource and the namespace's workloads, and explains who would roll out (for `new_content`, if
/// given: a ConfigMap's or Secret's proposed content, compared here and dropped).
pub async fn dependents(
    client: &Client,
    (kind, name): (ConfigKind, String),
    namespace: &str,
    settings: &Settings,
    new_content: Option<&Content>,
) -> Result<Dependents, ExplainError> {
    let keys = &settings.keys;
    let config = ConfigKey { kind, namespace: namespace.into(), name: name.clone() };
    let (facts, current) = match kind {
        ConfigKind::ConfigMap => {
            let cm = get_opt::<ConfigMap>(client, namespace, &name).await?;
            let content = cm.as_ref().map(preview::configmap_content);
            (cm.and_then(|c| configmap_facts(&c, keys)).map(|(_, f)| f), content)
        }
        ConfigKind::Secret => {
            let secret = get_opt::<Secret>(client, namespace, &name).await?;
            let content = secret.as_ref().map(preview::secret_content);
            (secret.and_then(|s| secret_facts(&s, keys)).map(|(_, f)| f), content)
        }
        ConfigKind::SecretProviderClass => {
            // Its content is what the driver mounted (seen in pod statuses); only its annotations matter here.
            let class = get_opt::<SecretProviderClass>(client, namespace, &name).await?;
            let facts = class.map(|c| config_flags(&c, keys)).map(|(i, m)| ConfigFacts::live(ContentHash::NONE, i, m));
            (facts, None)
        }
    };
    let preview = new_content.map(|new| preview::diff(&current.unwrap_or_default(), new));
    let (mut workloads, unwatched, unreadable) = list_workloads(client, Some(namespace), settings).await?;
    if settings.decisions.cross_namespace {
        // Workloads of other namespaces that name it `<namespace>/<name>` (every namespace is listed: a one-off).
        let (everywhere, _, _) = list_workloads(client, None, settings).await?;
        let names_it = |(k, s): &(WorkloadKey, WorkloadSummary)| {
            *k.namespace != *namespace && s.annotations.for_kind(kind).remote.iter().any(|e| e.names(namespace, &name))
        };
        workloads.extend(everywhere.into_iter().filter(names_it));
    }
    let around = Surroundings {
        not_watched: not_watched(client, &config, facts.is_some(), settings).await?,
        facts,
        workloads: &workloads,
        unwatched: &unwatched,
        unreadable: &unreadable,
        namespace_inactive: namespace_inactive(client, namespace, settings).await?,
        preview,
    };
    // Its workloads are in its namespace: that namespace's rules decide for them too.
    let rules = match settings.watch.namespace_rules {
        true => namespace_values(client, namespace, keys).await?.rules(),
        false => Default::default(),
    };
    let decisions = crate::rules::decision::DecisionSettings { namespace: rules, ..settings.decisions };
    Ok(explain_dependents(&config, &around, decisions, settings.strategy))
}

/// The resources of other namespaces a workload's `<namespace>/<name>` entries name (one LIST per namespace and
/// kind), with their facts.
async fn remote_facts(
    client: &Client,
    summary: &WorkloadSummary,
    namespace: &str,
    params: &ListParams,
    keys: &AnnotationKeys,
    watched: &[ConfigKind],
) -> Result<Vec<(ConfigKey, ConfigFacts)>, ExplainError> {
    let remote: std::collections::BTreeSet<(ConfigKind, &str)> = ConfigKind::ALL
        .into_iter()
        .filter(|k| watched.contains(k))
        .flat_map(|k| summary.annotations.for_kind(k).remote.iter().map(move |e| (k, e.namespace.as_str())))
        .filter(|(_, ns)| *ns != namespace)
        .collect();
    let mut out = Vec::new();
    for (kind, remote_ns) in remote {
        let mut found = Vec::new();
        let into = (&mut found, &mut Vec::new());
        match kind {
            ConfigKind::ConfigMap => {
                let read = (configmap_facts as FactsFn<ConfigMap>, configmap_views as ViewsFn<ConfigMap>);
                list_facts(client, remote_ns, params, keys, read, &[], into).await?;
            }
            _ => {
                let read = (secret_facts as FactsFn<Secret>, secret_views as ViewsFn<Secret>);
                list_facts(client, remote_ns, params, keys, read, &[], into).await?;
            }
        }
        let entries = &summary.annotations.for_kind(kind).remote;
        let named = |c: &ConfigKey| entries.iter().any(|e| e.names(&c.namespace, &c.name));
        out.extend(found.into_iter().filter(|(c, _)| c.kind == kind && named(c)));
    }
    Ok(out)
}

/// What [`list_workloads`] found: the workloads, the kinds not watched, the kinds the caller may not list.
type Listed = (Vec<(WorkloadKey, WorkloadSummary)>, Vec<WorkloadKind>, Vec<WorkloadKind>);

/// The namespace's workloads of the kinds the controller watches, the kinds it does not watch, and the kinds the
/// caller's credentials may not list (one forbidden kind does not withhold the answer for the others).
async fn list_workloads(client: &Client, namespace: Option<&str>, settings: &Settings) -> Result<Listed, ExplainError> {
    let mut workloads = Vec::new();
    let mut unwatched = Vec::new();
    let mut unreadable = Vec::new();
    for kind in WorkloadKind::all() {
        if !settings.watch.sources.contains(&Source::Workload(kind)) && !optional_on(settings, Source::Workload(kind)) {
            unwatched.push(kind);
            continue;
        }
        let found = crate::workload::list_summaries(client, kind, namespace, &settings.keys).await;
        match found {
            Ok(found) => workloads.extend(found),
            // An optional kind whose API is not served here has no workloads to explain.
            Err(kube::Error::Api(s)) if s.code == 404 && kind.facts().served_by_crd() => {}
            Err(kube::Error::Api(s)) if s.code == 403 => unreadable.push(kind),
            Err(source) => return Err(ExplainError::Api { what: format!("listing {kind}s"), source }),
        }
    }
    Ok((workloads, unwatched, unreadable))
}

/// Why the controller does not see the resource: its kind is not watched, or (ConfigMaps and Secrets) its labels
/// do not match `--resource-label-selector`, evaluated by the API server as the controller's watch is.
async fn not_watched(
    client: &Client,
    config: &ConfigKey,
    found: bool,
    settings: &Settings,
) -> Result<Option<String>, ExplainError> {
    let kinds = plural(config.kind);
    if config.kind == ConfigKind::SecretProviderClass {
        let on = optional_on(settings, Source::Config(ConfigKind::SecretProviderClass));
        return Ok((!on).then(|| format!("{kinds} are not watched (--enable-csi-integration is off)")));
    }
    if !settings.watch.config_kinds().contains(&config.kind) {
        return Ok(Some(format!("{kinds} are not watched (--resources-to-ignore)")));
    }
    let Some(selector) = settings.watch.resource_label_selector.as_deref().filter(|_| found) else { return Ok(None) };
    let params = ListParams::default().labels(selector).fields(&format!("metadata.name={}", config.name));
    let namespace = &config.namespace;
    let listed = match config.kind {
        ConfigKind::ConfigMap => {
            Api::<ConfigMap>::namespaced(client.clone(), namespace).list_metadata(&params).await.map(|l| l.items.len())
        }
        _ => Api::<Secret>::namespaced(client.clone(), namespace).list_metadata(&params).await.map(|l| l.items.len()),
    };
    let matching = listed.map_err(|source| ExplainError::Api { what: format!("listing {kinds}"), source })?;
    Ok((matching == 0).then(|| format!("its labels do not match --resource-label-selector {selector}")))
}

fn optional_on(settings: &Settings, source: Source) -> bool {
    settings.optional.iter().any(|o| o.sources.contains(&source))
}

/// The namespace's annotations the controller reads (`--namespace-reload-windows`, `--namespace-rules`).
async fn namespace_values(
    client: &Client,
    namespace: &str,
    keys: &AnnotationKeys,
) -> Result<NamespaceValues, ExplainError> {
    let ns = Api::<Namespace>::all(client.clone())
        .get_metadata_opt(namespace)
        .await
        .map_err(|source| ExplainError::Api { what: format!("reading namespace {namespace}"), source })?;
    let annotations = ns.and_then(|n| n.metadata.annotations).unwrap_or_default();
    Ok(NamespaceValues::read(&annotations, keys))
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

/// Reads one workload of a kind's type, summarised as the controller would.
struct GetWorkload<'a> {
    client: &'a Client,
    namespace: &'a str,
    name: &'a str,
    keys: &'a AnnotationKeys,
}

impl<'a> KindVisitor for GetWorkload<'a> {
    type Output = BoxFuture<'a, Result<Option<(WorkloadKey, WorkloadSummary)>, ExplainError>>;

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        let Self { client, namespace, name, keys } = self;
        Box::pin(async move {
            let what = format!("reading {} {namespace}/{name}", K::KIND);
            let obj = Api::<K>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .map_err(|source| ExplainError::Api { what: what.clone(), source })?;
            Ok(summarise(&obj, keys))
        })
    }
}

async fn get_opt<K>(client: &Client, namespace: &str, name: &str) -> Result<Option<K>, ExplainError>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| ExplainError::Api { what: format!("reading {} {namespace}/{name}", K::kind(&())), source })
}

type FactsFn<K> = fn(&K, &AnnotationKeys) -> Option<(ConfigKey, ConfigFacts)>;
type ViewsFn<K> = fn(&K, &[KeySet]) -> Vec<KeyView>;
type Views = Vec<(ConfigKey, ContentHash, Vec<KeyView>)>;

/// Lists one kind of resource into `out`: the facts of each, and the views of those `wanted` names.
async fn list_facts<K>(
    client: &Client,
    namespace: &str,
    params: &ListParams,
    keys: &AnnotationKeys,
    (facts, views): (FactsFn<K>, ViewsFn<K>),
    wanted: &[(ConfigKey, KeySet)],
    out: (&mut Vec<(ConfigKey, ConfigFacts)>, &mut Views),
) -> Result<(), ExplainError>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    let objects = Api::<K>::namespaced(client.clone(), namespace)
        .list(params)
        .await
        .map_err(|source| ExplainError::Api { what: format!("listing {}", K::plural(&())), source })?;
    for object in &objects.items {
        let Some((key, f)) = facts(object, keys) else { continue };
        let sets: Vec<KeySet> = wanted.iter().filter(|(c, _)| *c == key).map(|(_, k)| k.clone()).collect();
        if !sets.is_empty() {
            out.1.push((key.clone(), f.hash, views(object, &sets)));
        }
        out.0.push((key, f));
    }
    Ok(())
}
