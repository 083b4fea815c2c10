//! Watches turned into one stream of index observations. Objects are summarised as they arrive (a content
//! hash for resources, references and annotations for workloads) and dropped: no reflector store of full
//! objects is kept.

use std::sync::Arc;

use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;

use super::initial_lists::InitialLists;
use super::streams::{
    DigestFn, FactsFn, ViewsFn, WorkloadStream, api, config_stream, configmap_facts, csi_class_stream,
    csi_status_stream, namespace_annotation_stream, namespace_stream, secret_facts,
};
use crate::{
    annotations::AnnotationKeys,
    config::WatchScope,
    constants::{CONFIG_LIST_PAGE_SIZE, SECRET_FIELD_SELECTOR},
    index::{ConfigFacts, ConfigKey, KeyRegistry, KeyView, configmap_views, secret_views},
    keyprints::{KeyDigest, configmap_digest, secret_digest},
    resource::ConfigKind,
    workload::{WorkloadKey, WorkloadKind, WorkloadSummary, kinds::visit},
};

/// What one watch stream covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A resource kind.
    Config(ConfigKind),
    /// A workload kind.
    Workload(WorkloadKind),
    /// Namespaces matching `--namespace-selector`.
    Namespaces,
    /// Namespaces' annotations: `reload-window` (`--namespace-reload-windows`, issue 17), `auto`, `ignore` and
    /// `pause` (`--namespace-rules`, issue 29).
    NamespaceAnnotations,
    /// SecretProviderClass objects (for their `ignore`/`match` annotations); the class's content comes from
    /// `Config(SecretProviderClass)`, which watches SecretProviderClassPodStatuses.
    SecretProviderClasses,
}

impl Source {
    /// The API resource watched, as RBAC and `kubectl` name it (`deployments.apps`).
    pub fn api_resource(self) -> &'static str {
        match self {
            Self::Config(ConfigKind::ConfigMap) => "configmaps",
            Self::Config(ConfigKind::Secret) => "secrets",
            Self::Config(ConfigKind::SecretProviderClass) => {
                "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io"
            }
            Self::SecretProviderClasses => "secretproviderclasses.secrets-store.csi.x-k8s.io",
            Self::Namespaces | Self::NamespaceAnnotations => "namespaces",
            Self::Workload(kind) => kind.api_resource(),
        }
    }

    /// An optional API (Argo Rollouts, DeploymentConfigs, CSI): its failure degrades the controller but does
    /// not make it unready.
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            Self::Config(ConfigKind::SecretProviderClass) | Self::SecretProviderClasses | Self::NamespaceAnnotations
        ) || matches!(self, Self::Workload(kind) if kind.served_by_crd())
    }
}

/// A watch stream: its kind and namespace (`None` = all namespaces).
#[derive(Clone, Debug)]
pub struct StreamInfo {
    /// What it watches.
    pub source: Source,
    /// Where.
    pub namespace: Option<String>,
}

impl std::fmt::Display for StreamInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} in {ns}", self.source.api_resource()),
            None => write!(f, "{}", self.source.api_resource()),
        }
    }
}

/// One observation from a watch, already summarised.
#[derive(Debug)]
pub enum Observed {
    /// A (re)list started on stream `usize`.
    ListStarted(usize),
    /// A (re)list finished on stream `usize`: anything of this stream not seen since `ListStarted` is gone.
    ListDone(usize),
    /// A resource exists with these facts (`listed`: part of a (re)list), and the views of its content the
    /// key registry wanted when it arrived (key-level reloads).
    /// Its keys' fingerprints name the keys a change touched.
    Config { stream: usize, key: ConfigKey, facts: ConfigFacts, listed: bool, views: Vec<KeyView>, digest: KeyDigest },
    /// A resource was deleted (or stopped matching the resource label selector).
    ConfigDeleted(ConfigKey),
    /// A workload exists.
    Workload { stream: usize, key: WorkloadKey, summary: Box<WorkloadSummary>, listed: bool },
    /// A workload was deleted.
    WorkloadDeleted(WorkloadKey),
    /// A SecretProviderClassPodStatus: its class and the hash of the mounted versions (`None` before the driver
    /// wrote a status).
    CsiStatus {
        stream: usize,
        namespace: String,
        name: String,
        class_hash: Option<(String, crate::hash::ContentHash)>,
        listed: bool,
    },
    /// A SecretProviderClassPodStatus was deleted (never a trigger, as upstream).
    CsiStatusDeleted { namespace: String, name: String },
    /// A SecretProviderClass's `ignore` and `match` annotations.
    CsiClass { namespace: String, name: String, ignored: bool, matched: bool },
    /// A namespace matches the namespace selector.
    NamespaceSelected { stream: usize, name: String, listed: bool },
    /// A namespace no longer matches (or was deleted).
    NamespaceDeselected(String),
    /// A namespace's annotations the controller reads (all `None` when it was deleted).
    NamespaceAnnotations { stream: usize, name: String, values: NamespaceValues, listed: bool },
    /// What the pods of a workload without a pod template (`--workload-kind …=-`) use, read for the summary with
    /// `uid` (`Err`: the read failed; it is read again at the workload's next change).
    PodUses { key: WorkloadKey, uid: String, uses: Result<crate::workload::PodReferences, String> },
    /// The watch failed; it retries with backoff. `code`: the API server's status code, if it answered.
    Error { stream: usize, code: Option<u16>, message: String },
    /// Stream `usize` delivered again after failing (its watch resumed or it relisted).
    Recovered(usize),
    /// Jobs with an owed recreation, read from the cluster after a full reconcile was queued: queued where the
    /// controller acts (its namespaces, selector and ignore list), left to the controller whose they are elsewhere.
    OwedJobs(Vec<WorkloadKey>),
    /// Workload kinds that may not be watched, listed in the namespace of a changed resource `config`
    /// (fallback.rs); the change is acted on once they are indexed.
    FallbackListed { config: ConfigKey, lists: super::fallback::FallbackLists },
}

/// What to watch, from the validated flags.
#[derive(Clone, Debug)]
pub struct WatchPlan {
    /// Namespaces.
    pub scope: WatchScope,
    /// Kinds.
    pub sources: Vec<Source>,
    /// `--resource-label-selector`, applied by the API server to ConfigMaps and Secrets.
    pub resource_label_selector: Option<String>,
    /// `--namespace-selector`, applied by the API server to a Namespace watch.
    pub namespace_selector: Option<String>,
    /// `--namespace-reload-windows`: watch namespaces' `reload-window` annotations.
    pub namespace_windows: bool,
    /// `--namespace-rules`: watch namespaces' `auto`, `ignore` and `pause` annotations.
    pub namespace_rules: bool,
}

impl WatchPlan {
    /// The first namespace in scope (`None`: all) and the first of ConfigMaps and Secrets watched: where a probe
    /// of the API server reads what the controller's RBAC allows anyway.
    pub fn first_config_watch(&self) -> (Option<&str>, Option<ConfigKind>) {
        let namespace = match &self.scope {
            WatchScope::All => None,
            WatchScope::Namespaces(list) => list.first().map(String::as_str),
        };
        let kind = self.sources.iter().find_map(|s| match s {
            Source::Config(kind @ (ConfigKind::ConfigMap | ConfigKind::Secret)) => Some(*kind),
            _ => None,
        });
        (namespace, kind)
    }
}

/// The annotations of a Namespace the controller reads, as written (`None`: absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceValues {
    /// `reloader.stakater.com/reload-window`.
    pub window: Option<String>,
    /// The auto annotation (`--auto-annotation`).
    pub auto: Option<String>,
    /// The ignore annotation (`--ignore-annotation`).
    pub ignore: Option<String>,
    /// `reloader.stakater.com/pause`.
    pub pause: Option<String>,
}

impl NamespaceValues {
    /// Reads them from a Namespace's annotations.
    pub fn read(annotations: &std::collections::BTreeMap<String, String>, keys: &AnnotationKeys) -> Self {
        let get = |key: &str| annotations.get(key).cloned();
        Self {
            window: get(crate::constants::annotation::RELOAD_WINDOW),
            auto: get(&keys.auto),
            ignore: get(&keys.ignore),
            pause: get(crate::constants::annotation::PAUSE),
        }
    }

    /// The rules they say (invalid values count as absent).
    pub fn rules(&self) -> crate::decision::NamespaceRules {
        crate::decision::NamespaceRules::from_values(
            self.auto.as_deref(),
            self.ignore.as_deref(),
            self.pause.as_deref(),
        )
    }
}

impl WatchPlan {
    /// The ConfigMap/Secret kinds watched (`--resources-to-ignore` removes one).
    pub fn config_kinds(&self) -> Vec<ConfigKind> {
        let kinds = self.sources.iter().filter_map(|s| match s {
            Source::Config(kind @ (ConfigKind::ConfigMap | ConfigKind::Secret)) => Some(*kind),
            _ => None,
        });
        kinds.collect()
    }
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
        streams.push(namespace_stream(client, sel, 0));
    }
    if plan.namespace_windows || plan.namespace_rules {
        streams.push(namespace_annotation_stream(client, shared.keys.clone(), infos.len()));
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
    /// Streamed or paged initial lists (decided once, at start).
    pub initial_lists: InitialLists,
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
    let mut configs_cfg = shared.initial_lists.config(CONFIG_LIST_PAGE_SIZE);
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
                Source::Config(ConfigKind::SecretProviderClass) => csi_status_stream(api(client, &ns), id),
                Source::SecretProviderClasses => csi_class_stream(api(client, &ns), id, keys),
                Source::Config(ConfigKind::ConfigMap) => {
                    let translate = (
                        configmap_facts as FactsFn<ConfigMap>,
                        configmap_views as ViewsFn<ConfigMap>,
                        configmap_digest as DigestFn<ConfigMap>,
                    );
                    config_stream(api::<ConfigMap>(client, &ns), configs_cfg.clone(), id, shared.clone(), translate)
                }
                Source::Workload(kind) => {
                    let lists = shared.initial_lists;
                    visit(kind, WorkloadStream { client, namespace: &ns, id, keys, lists })
                }
                Source::Namespaces | Source::NamespaceAnnotations => continue,
            };
            infos.push(StreamInfo { source, namespace: ns.clone() });
            streams.push(stream);
        }
    }
}
