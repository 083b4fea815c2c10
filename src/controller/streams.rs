//! The watch streams themselves: one per (kind, namespace), each translating objects into [`Observed`] as they
//! arrive — resources into their facts (content hash, flags, key-level views, key fingerprints), workloads into
//! summaries — and dropping them; and [`observe`], which builds those a [`WatchPlan`] asks for and merges them.

use std::sync::Arc;

use futures::stream::BoxStream;
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{ConfigMap, Namespace, Secret},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::{DeserializeGuard, PartialObjectMeta},
    runtime::watcher,
};
use serde::de::DeserializeOwned;

use super::{
    initial_lists::{InitialLists, watch_collection},
    translate::translate,
    watch::{NamespaceValues, Observed, Source, StreamInfo, WatchPlan},
};
use crate::rules::{
    annotations::AnnotationKeys,
    csi::{SecretProviderClass, SecretProviderClassPodStatus},
    hash,
    keyprints::{KeyDigest, configmap_digest, secret_digest},
    references::KeySet,
    resource::ConfigKind,
};
use crate::{
    config::WatchScope,
    constants::{CONFIG_LIST_PAGE_SIZE, SECRET_FIELD_SELECTOR, TRUE, WORKLOAD_LIST_PAGE_SIZE},
    index::{ConfigFacts, ConfigKey, KeyRegistry, KeyView, configmap_views, secret_views},
    workload::{Lean, WorkloadKey, WorkloadObject, kinds::KindVisitor, kinds::visit, summarise},
};

/// A namespace selector's matches as observations.
pub(super) fn namespace_stream(
    client: &Client,
    selector: &str,
    id: usize,
    lists: InitialLists,
) -> BoxStream<'static, Observed> {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
    translate(
        watch_collection(api, watcher::Config::default().labels(selector), lists),
        id,
        move |ns: PartialObjectMeta<Namespace>, listed| {
            Some(Observed::NamespaceSelected { stream: id, name: ns.name_any(), listed })
        },
        |ns: PartialObjectMeta<Namespace>| Some(Observed::NamespaceDeselected(ns.name_any())),
    )
}

/// Namespaces' annotations as observations (`--namespace-reload-windows`, `--namespace-rules`).
pub(super) fn namespace_annotation_stream(
    client: &Client,
    keys: Arc<AnnotationKeys>,
    id: usize,
    lists: InitialLists,
) -> BoxStream<'static, Observed> {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
    translate(
        watch_collection(api, watcher::Config::default(), lists),
        id,
        move |ns: PartialObjectMeta<Namespace>, listed| {
            let values = NamespaceValues::read(ns.annotations(), &keys);
            Some(Observed::NamespaceAnnotations { stream: id, name: ns.name_any(), values, listed })
        },
        move |ns: PartialObjectMeta<Namespace>| {
            let (name, values) = (ns.name_any(), NamespaceValues::default());
            Some(Observed::NamespaceAnnotations { stream: id, name, values, listed: false })
        },
    )
}

pub(super) fn api<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

pub(super) type FactsFn<K> = fn(&K, &AnnotationKeys) -> Option<(ConfigKey, ConfigFacts)>;
pub(super) type ViewsFn<K> = fn(&K, &[KeySet]) -> Vec<KeyView>;
pub(super) type DigestFn<K> = fn(&K) -> KeyDigest;

/// A resource's `ignore` and `match` annotations (true only when set to "true").
pub fn config_flags(obj: &impl Resource, keys: &AnnotationKeys) -> (bool, bool) {
    let a = obj.meta().annotations.as_ref();
    let is = |k: &str| a.and_then(|a| a.get(k)).is_some_and(|v| v == TRUE);
    (is(&keys.ignore), is(&keys.matches))
}

fn config_key(kind: ConfigKind, obj: &impl Resource) -> Option<ConfigKey> {
    Some(ConfigKey { kind, namespace: obj.meta().namespace.as_deref()?.into(), name: obj.meta().name.clone()? })
}

/// The index facts of one ConfigMap (content hash and flags, never its data).
pub fn configmap_facts(cm: &ConfigMap, keys: &AnnotationKeys) -> Option<(ConfigKey, ConfigFacts)> {
    let (ignored, matched) = config_flags(cm, keys);
    let hash = hash::configmap(cm.data.as_ref(), cm.binary_data.as_ref());
    let facts = ConfigFacts::live(hash, ignored, matched).released_by(release_hold(cm)).written(last_written(cm));
    Some((config_key(ConfigKind::ConfigMap, cm)?, facts.consenting(allow_references_from(cm))))
}

/// When an object was last written, as the API server recorded it: the newest time of its `managedFields` (a
/// manager's entry is stamped whenever it changes a field it owns). An upper bound of when its content changed;
/// `None` when a client stripped them.
fn last_written(obj: &impl Resource) -> Option<jiff::Timestamp> {
    obj.meta().managed_fields.as_ref()?.iter().filter_map(|entry| entry.time.as_ref().map(|t| t.0)).max()
}

/// A resource's `release-hold` annotation (issue 17).
fn release_hold(obj: &impl Resource) -> Option<&str> {
    obj.meta().annotations.as_ref()?.get(crate::constants::annotation::RELEASE_HOLD).map(String::as_str)
}

/// A resource's `allow-references-from` annotation (issue 38).
fn allow_references_from(obj: &impl Resource) -> Option<&str> {
    obj.meta().annotations.as_ref()?.get(crate::constants::annotation::ALLOW_REFERENCES_FROM).map(String::as_str)
}

/// The index facts of one Secret (content hash and flags, never its data).
pub fn secret_facts(s: &Secret, keys: &AnnotationKeys) -> Option<(ConfigKey, ConfigFacts)> {
    let (ignored, matched) = config_flags(s, keys);
    let facts = ConfigFacts::live(hash::secret(s.data.as_ref()), ignored, matched);
    let facts = facts.sealed_by(s.metadata.uid.as_deref().unwrap_or_default()).released_by(release_hold(s));
    let facts = facts.written(last_written(s)).consenting(allow_references_from(s));
    Some((config_key(ConfigKind::Secret, s)?, facts))
}

pub(super) fn config_stream<K>(
    api: Api<K>,
    cfg: watcher::Config,
    id: usize,
    shared: StreamContext,
    (facts, views, digest): (FactsFn<K>, ViewsFn<K>, DigestFn<K>),
) -> BoxStream<'static, Observed>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let lists = shared.lists;
    translate(
        watch_collection(api, cfg, lists),
        id,
        move |obj: K, listed| {
            let (key, facts) = facts(&obj, &shared.keys)?;
            let wanted = shared.key_registry.wanted(&key);
            let views = if wanted.is_empty() { Vec::new() } else { views(&obj, &wanted) };
            Some(Observed::Config { stream: id, key, facts, listed, views, digest: digest(&obj) })
        },
        move |obj: K| {
            let kind =
                if K::kind(&Default::default()) == "Secret" { ConfigKind::Secret } else { ConfigKind::ConfigMap };
            config_key(kind, &obj).map(Observed::ConfigDeleted)
        },
    )
}

/// Workload watches list in pages of [`WORKLOAD_LIST_PAGE_SIZE`].
fn workload_list_config() -> watcher::Config {
    watcher::Config::default().page_size(WORKLOAD_LIST_PAGE_SIZE)
}

/// Workloads are decoded [`Lean`]: without their `managedFields`.
/// The watch stream of one workload kind's type in one namespace (`None`: all).
pub(super) struct WorkloadStream<'a> {
    pub(super) client: &'a Client,
    pub(super) namespace: &'a Option<String>,
    pub(super) id: usize,
    pub(super) keys: Arc<AnnotationKeys>,
    pub(super) lists: InitialLists,
}

impl KindVisitor for WorkloadStream<'_> {
    type Output = BoxStream<'static, Observed>;

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        let Self { client, namespace, id, keys, lists } = self;
        if K::facts().served_by_crd() {
            guarded_workload_stream::<K>(api(client, namespace), id, keys, lists)
        } else {
            workload_stream::<K>(api(client, namespace), id, keys, lists)
        }
    }
}

fn workload_stream<K: WorkloadObject>(
    api: Api<Lean<K>>,
    id: usize,
    keys: Arc<AnnotationKeys>,
    lists: InitialLists,
) -> BoxStream<'static, Observed> {
    translate(
        watch_collection(api, workload_list_config(), lists),
        id,
        move |obj: Lean<K>, listed| {
            summarise(&obj.0, &keys).map(|(key, s)| Observed::Workload {
                stream: id,
                key,
                summary: Box::new(s),
                listed,
            })
        },
        |obj: Lean<K>| {
            let namespace = obj.namespace()?;
            Some(Observed::WorkloadDeleted(WorkloadKey {
                kind: K::KIND,
                namespace: namespace.into(),
                name: obj.name_any(),
            }))
        },
    )
}

pub(super) fn csi_status_stream(
    api: Api<DeserializeGuard<SecretProviderClassPodStatus>>,
    id: usize,
    lists: InitialLists,
) -> BoxStream<'static, Observed> {
    translate(
        watch_collection(api, watcher::Config::default(), lists),
        id,
        move |obj: DeserializeGuard<SecretProviderClassPodStatus>, listed| {
            let status = obj.0.ok()?;
            Some(Observed::CsiStatus {
                stream: id,
                namespace: status.metadata.namespace.clone()?,
                name: status.metadata.name.clone()?,
                class_hash: status.class_hash(),
                listed,
            })
        },
        |obj: DeserializeGuard<SecretProviderClassPodStatus>| {
            Some(Observed::CsiStatusDeleted { namespace: obj.namespace()?, name: obj.name_any() })
        },
    )
}

pub(super) fn csi_class_stream(
    api: Api<DeserializeGuard<SecretProviderClass>>,
    id: usize,
    keys: Arc<AnnotationKeys>,
    lists: InitialLists,
) -> BoxStream<'static, Observed> {
    translate(
        watch_collection(api, watcher::Config::default(), lists),
        id,
        move |obj: DeserializeGuard<SecretProviderClass>, _| {
            let (ignored, matched) = config_flags(&obj, &keys);
            Some(Observed::CsiClass { namespace: obj.namespace()?, name: obj.name_any(), ignored, matched })
        },
        |obj: DeserializeGuard<SecretProviderClass>| {
            Some(Observed::CsiClass {
                namespace: obj.namespace()?,
                name: obj.name_any(),
                ignored: false,
                matched: false,
            })
        },
    )
}

/// Custom resources whose schema we do not own: an object that does not deserialize is logged and skipped
/// instead of failing the whole watch.
fn guarded_workload_stream<K: WorkloadObject>(
    api: Api<DeserializeGuard<Lean<K>>>,
    id: usize,
    keys: Arc<AnnotationKeys>,
    lists: InitialLists,
) -> BoxStream<'static, Observed> {
    translate(
        watch_collection(api, workload_list_config(), lists),
        id,
        move |obj: DeserializeGuard<Lean<K>>, listed| match obj.0 {
            Ok(obj) => summarise(&obj.0, &keys).map(|(key, s)| Observed::Workload {
                stream: id,
                key,
                summary: Box::new(s),
                listed,
            }),
            Err(invalid) => {
                tracing::warn!(kind = %K::KIND, namespace = ?invalid.metadata.namespace, name = ?invalid.metadata.name,
                               "skipping an object that does not deserialize: {}", invalid.error);
                None
            }
        },
        |obj: DeserializeGuard<Lean<K>>| {
            let namespace = obj.namespace()?;
            Some(Observed::WorkloadDeleted(WorkloadKey {
                kind: K::KIND,
                namespace: namespace.into(),
                name: obj.name_any(),
            }))
        },
    )
}

/// The merged stream of every watch; more can be pushed (kinds whose API appears later).
pub type Streams = futures::stream::SelectAll<BoxStream<'static, Observed>>;

/// Builds every watch stream of `plan` for the kinds in `sources` and merges them.
pub fn observe(
    client: &Client,
    plan: &WatchPlan,
    sources: &[Source],
    shared: &StreamContext,
) -> (Vec<StreamInfo>, Streams) {
    let mut infos = Vec::new();
    let mut streams = Streams::new();
    if let Some(sel) = &plan.namespace_selector {
        infos.push(StreamInfo { source: Source::Namespaces, namespace: None });
        streams.push(namespace_stream(client, sel, 0, shared.lists));
    }
    if plan.namespace_windows || plan.namespace_rules {
        streams.push(namespace_annotation_stream(client, shared.keys.clone(), infos.len(), shared.lists));
        infos.push(StreamInfo { source: Source::NamespaceAnnotations, namespace: None });
    }
    add_sources(client, plan, sources, shared, &mut infos, &mut streams);
    (infos, streams)
}

/// What every stream reads while translating objects: the annotation keys, and which key sets of which resources
/// the index wants views of.
#[derive(Clone, Debug)]
pub struct StreamContext {
    /// Annotation keys in use.
    pub keys: Arc<AnnotationKeys>,
    /// Key-level reloads' registry (shared with the index).
    pub key_registry: Arc<KeyRegistry>,
    /// How the streams read their initial lists.
    pub lists: InitialLists,
}

/// Adds one stream per namespace in scope for each of `sources`; stream ids continue from `infos.len()`.
pub fn add_sources(
    client: &Client,
    plan: &WatchPlan,
    sources: &[Source],
    shared: &StreamContext,
    infos: &mut Vec<StreamInfo>,
    streams: &mut Streams,
) {
    let namespaces: Vec<Option<String>> = match &plan.scope {
        WatchScope::All => vec![None],
        WatchScope::Namespaces(list) => list.iter().cloned().map(Some).collect(),
    };
    let mut configs_cfg = watcher::Config::default().page_size(CONFIG_LIST_PAGE_SIZE);
    if let Some(sel) = &plan.resource_label_selector {
        configs_cfg = configs_cfg.labels(sel);
    }
    for ns in namespaces {
        for &source in sources {
            let id = infos.len();
            let keys = shared.keys.clone();
            let stream = match source {
                Source::Config(ConfigKind::Secret) => {
                    let cfg = configs_cfg.clone().fields(SECRET_FIELD_SELECTOR);
                    config_stream(
                        api::<Secret>(client, &ns),
                        cfg,
                        id,
                        shared.clone(),
                        (secret_facts, secret_views, secret_digest),
                    )
                }
                // upstream v1 applied the resource label selector to these too, silencing CSI reloads: not here.
                Source::Config(ConfigKind::SecretProviderClass) => {
                    csi_status_stream(api(client, &ns), id, shared.lists)
                }
                Source::SecretProviderClasses => csi_class_stream(api(client, &ns), id, keys, shared.lists),
                Source::Config(ConfigKind::ConfigMap) => {
                    let translate = (
                        configmap_facts as FactsFn<ConfigMap>,
                        configmap_views as ViewsFn<ConfigMap>,
                        configmap_digest as DigestFn<ConfigMap>,
                    );
                    config_stream(api::<ConfigMap>(client, &ns), configs_cfg.clone(), id, shared.clone(), translate)
                }
                Source::Workload(kind) => {
                    visit(kind, WorkloadStream { client, namespace: &ns, id, keys, lists: shared.lists })
                }
                Source::Namespaces | Source::NamespaceAnnotations => continue,
            };
            infos.push(StreamInfo { source, namespace: ns.clone() });
            streams.push(stream);
        }
    }
}
