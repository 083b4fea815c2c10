//! What the watches cover and what they report: the [`Source`] of each stream, the [`WatchPlan`] of them all and
//! the [`Observed`] facts they turn objects into as they arrive (a content hash for resources, references and
//! annotations for workloads), dropping the objects: no reflector store of full objects is kept. The streams
//! themselves are built in `streams.rs`.

use crate::rules::{annotations::AnnotationKeys, keyprints::KeyDigest, resource::ConfigKind};
use crate::{
    config::WatchScope,
    index::{ConfigFacts, ConfigKey, KeyView},
    workload::{WorkloadKey, WorkloadKind, WorkloadSummary},
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
            Self::Workload(kind) => kind.facts().api_resource,
        }
    }

    /// An optional API (Argo Rollouts, DeploymentConfigs, CSI): its failure degrades the controller but does
    /// not make it unready.
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            Self::Config(ConfigKind::SecretProviderClass) | Self::SecretProviderClasses | Self::NamespaceAnnotations
        ) || matches!(self, Self::Workload(kind) if kind.facts().served_by_crd())
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
        class_hash: Option<(String, crate::rules::hash::ContentHash)>,
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
    /// (observer/fallback.rs); the change is acted on once they are indexed.
    FallbackListed { config: ConfigKey, lists: FallbackLists },
}

/// The workloads one fallback LIST found, per stream.
pub(crate) type FallbackLists = Vec<(usize, Result<Vec<(WorkloadKey, WorkloadSummary)>, String>)>;

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
    pub fn rules(&self) -> crate::rules::decision::NamespaceRules {
        crate::rules::decision::NamespaceRules::from_values(
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
