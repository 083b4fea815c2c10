//! Command-line flags (upstream v1 names; every flag also from an env var, upper-case with `_`, as upstream v2
//! binds them) and their validation. Flags we add beyond upstream read `RELOADER_*` env vars so they cannot
//! collide with unrelated variables. Invalid values exit with status 2 and name the flag and accepted values.

use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use crate::rules::strategy::{ReloadStrategy, RolloutStrategy};

/// `--log-format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (upstream's default, selected by an empty value).
    #[default]
    #[value(name = "text", alias = "")]
    Text,
    /// One JSON object per line.
    #[value(name = "json")]
    Json,
}

/// `--log-level`: logrus level names (upstream v1), mapped onto tracing levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// trace
    Trace,
    /// debug
    Debug,
    /// info (default)
    #[default]
    Info,
    /// warning (alias warn)
    #[value(alias = "warn")]
    Warning,
    /// error
    Error,
    /// fatal (logged as error)
    Fatal,
    /// panic (logged as error)
    Panic,
}

impl LogLevel {
    /// The tracing filter directive for this level.
    pub fn directive(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warning => "warn",
            Self::Error | Self::Fatal | Self::Panic => "error",
        }
    }
}

/// Parses a boolean flag or env value: `true/false`, `1/0`, `yes/no` (any case). Upstream v1 compares some
/// string flags with exactly `"true"`; v2 accepts these spellings, and anything else is an error here rather
/// than a silent `false`.
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "t" => Ok(true),
        "false" | "0" | "no" | "f" | "" => Ok(false),
        _ => Err(format!("invalid boolean {value:?} [possible values: true, false]")),
    }
}

pub(crate) fn parse_duration(value: &str) -> Result<Duration, String> {
    crate::rules::duration::parse_go_duration(value).map_err(|e| format!("{e} (a Go duration such as 500ms, 5s, 1m)"))
}

/// `--kube-api-qps`: a finite rate ≥ 0. A negative or NaN value would otherwise switch the limit off unnoticed
/// (the bucket takes only rates above 0).
fn parse_qps(value: &str) -> Result<f64, String> {
    const EXPECTED: &str = "writes per second, a number ≥ 0 (0 disables the limit)";
    match value.trim().parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        Ok(_) => Err(EXPECTED.to_owned()),
        Err(e) => Err(format!("{e}: {EXPECTED}")),
    }
}

/// All flags.
#[derive(Parser, Debug, Clone)]
// A flag given twice takes its last value, as pflag does (upstream's manifests and wrappers append flags).
#[command(
    name = "reloader",
    version = crate::build_info::LONG_VERSION,
    args_override_self = true,
    about = "Rolls out workloads when the ConfigMaps and Secrets they use change (Stakater Reloader compatible)"
)]
pub struct Args {
    /// Reload every workload that uses a changed resource unless it opts out with `reloader.stakater.com/auto: "false"`.
    #[arg(long, env = "AUTO_RELOAD_ALL", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub auto_reload_all: bool,

    /// How a reload is written: `env-vars` (STAKATER_* env var, default) or `annotations` (pod-template annotation).
    #[arg(long, env = "RELOAD_STRATEGY", value_enum, default_value = "env-vars")]
    pub reload_strategy: ReloadStrategy,

    /// What a reload writes to roll the pods: `rollout` (the reload strategy's mark in the pod template, default)
    /// or `restart` (`kubectl rollout restart`'s `kubectl.kubernetes.io/restartedAt`, Argo's `spec.restartAt`;
    /// the hashes then live in the `applied-hashes` record only). Per workload:
    /// `reloader.stakater.com/rollout-strategy`.
    #[arg(long, env = "RELOADER_ROLLOUT_STRATEGY", value_enum, default_value = "rollout")]
    pub rollout_strategy: RolloutStrategy,

    /// Log format: empty or `text` for text lines, `json` for JSON lines.
    #[arg(long, env = "LOG_FORMAT", value_enum, ignore_case = true, default_value = "text", hide_default_value = true)]
    pub log_format: LogFormat,

    /// Log level: trace, debug, info, warning, error, fatal, panic.
    #[arg(long, env = "LOG_LEVEL", value_enum, ignore_case = true, default_value = "info")]
    pub log_level: LogLevel,

    /// Watch only these namespaces (comma-separated, repeatable). Default: `KUBERNETES_NAMESPACE` if set, else all.
    #[arg(long, env = "NAMESPACES", value_delimiter = ',', action = ArgAction::Append)]
    pub namespaces: Vec<String>,

    /// Single-namespace mode (upstream v1: set by the chart when `watchGlobally=false`).
    #[arg(long = "kubernetes-namespace", env = "KUBERNETES_NAMESPACE", hide = true)]
    pub kubernetes_namespace: Option<String>,

    /// Reload workloads when a resource they select is created (upstream: a string compared with "true").
    #[arg(long, env = "RELOAD_ON_CREATE", value_parser = parse_bool, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub reload_on_create: bool,

    /// Which changes roll a workload that has no `reloader.stakater.com/reload-on` annotation: `any-key`
    /// (upstream's behaviour) or `keys-used` — only a change of a key its pod spec reads (`env[].valueFrom`, volume
    /// and projected `items`; `envFrom` and whole volumes read every key). Ours.
    #[arg(long, env = "RELOADER_RELOAD_ON", default_value = "any-key", value_parser = ["any-key", "keys-used"])]
    pub reload_on: String,

    /// Reload workloads when a resource they select is deleted (env-vars: the STAKATER_* var is removed).
    #[arg(long, env = "RELOAD_ON_DELETE", value_parser = parse_bool, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub reload_on_delete: bool,

    /// At startup, treat every existing resource as created: workloads with no recorded hash for a resource
    /// they select are reloaded once (upstream's meaning; without it they are only baselined).
    #[arg(long, env = "SYNC_AFTER_RESTART", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub sync_after_restart: bool,

    /// Only namespaces whose labels match this selector (global mode only). Upstream's `key:value` and `key:*`
    /// forms are accepted.
    #[arg(long, env = "NAMESPACE_SELECTOR", value_delimiter = ',', action = ArgAction::Append)]
    pub namespace_selector: Vec<String>,

    /// Namespaces to ignore (global mode only).
    #[arg(long, env = "NAMESPACES_TO_IGNORE", value_delimiter = ',', action = ArgAction::Append)]
    pub namespaces_to_ignore: Vec<String>,

    /// Only ConfigMaps and Secrets whose labels match this selector (applied by the API server).
    #[arg(long, env = "RESOURCE_LABEL_SELECTOR", value_delimiter = ',', action = ArgAction::Append)]
    pub resource_label_selector: Vec<String>,

    /// Do not watch this resource type: `configmaps` or `secrets` (not both).
    #[arg(long, env = "RESOURCES_TO_IGNORE", value_delimiter = ',', action = ArgAction::Append)]
    pub resources_to_ignore: Vec<String>,

    /// Workload types not to reload: `jobs`, `cronjobs`, or both.
    #[arg(long, env = "IGNORED_WORKLOAD_TYPES", value_delimiter = ',', action = ArgAction::Append)]
    pub ignored_workload_types: Vec<String>,

    /// Changes to several resources of one workload become one rollout: the longest a change waits for others
    /// (0 disables coalescing).
    #[arg(long, env = "RELOADER_COALESCE_WINDOW", default_value = "1s", value_parser = parse_duration)]
    pub coalesce_window: Duration,

    /// A ceiling on workload writes per second (reloads and records), after a burst. 0 (the default): none —
    /// at most `--workers` writes at once, as fast as the API server answers, which slows them down itself
    /// (API Priority and Fairness answers 429 with `Retry-After`, and that wait is kept).
    #[arg(long, env = "RELOADER_KUBE_API_QPS", default_value_t = 0.0, value_parser = parse_qps)]
    pub kube_api_qps: f64,

    /// Writes allowed at once before `--kube-api-qps` applies.
    #[arg(long, env = "RELOADER_KUBE_API_BURST", default_value_t = 100)]
    pub kube_api_burst: u32,

    /// A workload's rollout waits until no further change concerning it has arrived for this long (never past
    /// `--coalesce-window`). 200ms covers `kubectl apply -f dir/` (writes 60–110 ms apart, measured on the local
    /// control plane) and Helm upgrades (5–15 ms); raise it for clients far from the API server.
    #[arg(long, env = "RELOADER_COALESCE_QUIET", default_value = "200ms", value_parser = parse_duration)]
    pub coalesce_quiet: Duration,

    /// At most this many workloads are in the middle of a rollout this controller started (every kind but
    /// CronJobs and Jobs, counted from the template write until their status shows the rollout complete);
    /// the others wait their turn and roll once, with the latest content. 0: unlimited.
    #[arg(long, env = "RELOADER_MAX_CONCURRENT_ROLLOUTS", default_value_t = 0)]
    pub max_concurrent_rollouts: usize,

    /// How long a rollout counts against `--max-concurrent-rollouts` at most (one that never completes must not
    /// hold its slot forever); also how long after its reload a Job deleted for it may still be created again.
    #[arg(long, env = "RELOADER_ROLLOUT_TIMEOUT", default_value = "10m", value_parser = parse_duration)]
    pub rollout_timeout: Duration,

    /// When a rollout this controller started fails (a Deployment's `ProgressDeadlineExceeded`, or past
    /// `--rollout-timeout`), the workloads still waiting for the same change (behind `--max-concurrent-rollouts`
    /// or a `rollout-wave`) are not rolled until it changes again or is released. Per workload:
    /// `reloader.stakater.com/halt-on-failed-rollout`.
    #[arg(long, env = "RELOADER_HALT_ON_FAILED_ROLLOUT", value_parser = parse_bool, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub halt_on_failed_rollout: bool,

    /// Read `reloader.stakater.com/reload-window` from namespaces too (needs `list`/`watch` on namespaces): a
    /// workload without a window of its own follows its namespace's.
    #[arg(long, env = "RELOADER_NAMESPACE_RELOAD_WINDOWS", value_parser = parse_bool, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub namespace_reload_windows: bool,

    /// A named-list entry `<namespace>/<name>` (`configmap.reloader.stakater.com/reload: "istio-system/stable-tag"`)
    /// reloads the workload when that resource of another namespace changes, if the resource consents
    /// (`reloader.stakater.com/allow-references-from` names the workload's namespace, or `*`). Off by default: it
    /// lets a tenant make another namespace's resource drive its rollouts. The namespace must be watched
    /// (`--namespaces`, `--namespace-selector`, `--namespaces-to-ignore` apply to it as to any resource).
    #[arg(long, env = "RELOADER_ALLOW_CROSS_NAMESPACE_REFERENCES", value_parser = parse_bool, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub allow_cross_namespace_references: bool,

    /// Read `reloader.stakater.com/auto`, `…/ignore` and `…/pause` from namespaces (needs `list`/`watch` on
    /// namespaces): each applies to every workload in the namespace that has no value of its own.
    #[arg(long, env = "RELOADER_NAMESPACE_RULES", value_parser = parse_bool, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub namespace_rules: bool,

    /// `<namespace>/<name>` of a Secret whose `key` entry (≥ 16 bytes) keys the Secret hashes written on
    /// workloads: `STAKATER_*_SECRET` values and `last-reloaded-from` hashes become HMAC-SHA1 digests (same shape)
    /// that reveal nothing about the Secret without the key. Switching it on, off or rotating it rolls nothing.
    #[arg(long, env = "RELOADER_HASH_KEY_SECRET")]
    pub hash_key_secret: Option<String>,

    /// Address of the metrics and health server (`/metrics`, `/live`, `/healthz`, `/readyz`); Go form `:9090`.
    #[arg(long, env = "METRICS_ADDR", default_value = ":9090")]
    pub metrics_addr: String,

    /// Also serve the health endpoints on this address (upstream v2's separate health port); empty: only on
    /// the metrics address.
    #[arg(long, env = "HEALTH_ADDR", default_value = "")]
    pub health_addr: String,

    /// Also count reloads per namespace (`reloader_reload_executed_total_by_namespace`), as upstream: `enabled`.
    #[arg(long = "metrics-count-by-namespace", env = "METRICS_COUNT_BY_NAMESPACE", default_value = "", hide = true)]
    pub metrics_count_by_namespace: String,

    #[command(flatten)]
    pub leader: LeaderArgs,

    /// Adds a workload kind whose objects embed a pod template: `<group>/<version>/<Kind>[=<path>]` (path default
    /// `spec.template`), or a preset: `knative-service`, `kruise-cloneset`, `kruise-statefulset`,
    /// `kruise-daemonset`. Repeatable; the env var takes a comma list. Watched once its API is served.
    #[arg(long = "workload-kind", env = "RELOADER_WORKLOAD_KINDS", value_delimiter = ',')]
    pub workload_kinds: Vec<String>,

    /// Reload Argo Rollouts (`--is-Argo-Rollouts=true` is upstream v1's spelling, also accepted).
    #[arg(long = "is-argo-rollouts", alias = "is-Argo-Rollouts", env = "IS_ARGO_ROLLOUTS", value_parser = parse_bool,
          num_args = 0..=1, default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub is_argo_rollouts: bool,

    /// Reload OpenShift DeploymentConfigs: `true`, `false`, or empty/`auto` to detect the API (upstream v2).
    #[arg(long, env = "IS_OPENSHIFT", default_value = "")]
    pub is_openshift: String,

    /// Reload workloads when the Secrets Store CSI driver mounts new versions of a SecretProviderClass's objects.
    #[arg(long, env = "ENABLE_CSI_INTEGRATION", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub enable_csi_integration: bool,

    /// How often APIs of enabled optional kinds that are not installed yet are looked for again.
    #[arg(long, env = "RELOADER_DISCOVERY_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub discovery_interval: Duration,

    #[command(flatten)]
    pub alerts: AlertArgs,

    #[command(flatten)]
    pub meta_info: MetaInfoArgs,

    #[command(flatten)]
    pub later: CompatOnly,

    /// Number of workloads patched concurrently.
    #[arg(long, env = "RELOADER_WORKERS", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub workers: u16,

    /// Upper bound of the retry backoff for failed patches.
    #[arg(long, env = "RELOADER_MAX_RETRY_BACKOFF", default_value = "30s", value_parser = parse_duration)]
    pub max_retry_backoff: Duration,

    #[command(flatten)]
    pub annotations: AnnotationArgs,

    /// A one-off command instead of running the controller (flags before it still apply).
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Stray positional arguments: upstream (cobra) ignores them, so a command line that worked there works
    /// here; they are logged at startup.
    #[arg(hide = true)]
    pub ignored_arguments: Vec<String>,
}

/// Commands besides running the controller.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Print which ConfigMaps and Secrets reload a workload and why, and whether the controller would roll it
    /// out now; or, for a ConfigMap, Secret or SecretProviderClass, which workloads its change would roll out.
    /// Then exit. Reads only. Works as a kubectl plugin (`kubectl reloader explain …` with the binary installed
    /// as `kubectl-reloader`).
    Explain(ExplainArgs),
}

mod annotation_args;
mod explain;
mod ops;

pub use annotation_args::AnnotationArgs;
pub use explain::{ExplainArgs, OutputFormat};
pub use ops::{AlertArgs, CompatOnly, LeaderArgs, LeaderElection, MetaInfoArgs};

/// A flag combination upstream rejects at startup (exit status 2 here), with upstream's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--resources-to-ignore` with an unknown value.
    #[error("'resources-to-ignore' only accepts 'configmaps' or 'secrets', not '{0}'")]
    UnknownResourceType(String),
    /// `--resources-to-ignore` with both types.
    #[error("'resources-to-ignore' only accepts 'configmaps' or 'secrets', not both")]
    BothResourcesIgnored,
    /// `--ignored-workload-types` with an unknown value.
    #[error("'ignored-workload-types' accepts 'jobs', 'cronjobs', or both, not '{0}'")]
    UnknownWorkloadType(String),
    /// An invalid `--workload-kind`.
    #[error(transparent)]
    WorkloadKind(#[from] crate::rules::configured_kinds::KindError),
    /// An invalid label selector.
    #[error("--{flag}: {source}")]
    Selector {
        /// The flag.
        flag: &'static str,
        /// Why.
        source: crate::rules::selector::SelectorError,
    },
}

/// The validated scoping flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scoping {
    /// Watch ConfigMaps.
    pub configmaps: bool,
    /// Watch Secrets.
    pub secrets: bool,
    /// Reload Jobs.
    pub jobs: bool,
    /// Reload CronJobs.
    pub cronjobs: bool,
    /// Namespace label selector (global mode only).
    pub namespace_selector: Option<String>,
    /// Namespaces to ignore (global mode only).
    pub namespaces_to_ignore: Vec<String>,
    /// ConfigMap/Secret label selector.
    pub resource_label_selector: Option<String>,
}

/// Which namespaces are watched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// All namespaces.
    All,
    /// Exactly these.
    Namespaces(Vec<String>),
}

impl Args {
    /// Validates the scoping flags with upstream's rules and messages.
    pub fn scoping(&self) -> Result<Scoping, ConfigError> {
        let mut ignored_resources: Vec<String> = Vec::new();
        for r in self.resources_to_ignore.iter().map(|r| r.trim().to_ascii_lowercase()).filter(|r| !r.is_empty()) {
            if r != "configmaps" && r != "secrets" {
                return Err(ConfigError::UnknownResourceType(r));
            }
            ignored_resources.push(r);
        }
        // upstream v1: more than one entry (even a duplicate) is rejected.
        if ignored_resources.len() > 1 {
            return Err(ConfigError::BothResourcesIgnored);
        }
        let mut ignored_kinds = Vec::new();
        for t in self.ignored_workload_types.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            // `Jobs` as well as `jobs`: the chart's values are written by hand.
            let t = t.to_ascii_lowercase();
            if t != "jobs" && t != "cronjobs" {
                return Err(ConfigError::UnknownWorkloadType(t));
            }
            ignored_kinds.push(t);
        }
        let global = self.watch_scope() == WatchScope::All;
        let selector = |flag, v: &[String]| {
            crate::rules::selector::normalise(v).map_err(|source| ConfigError::Selector { flag, source })
        };
        let namespace_selector = selector("namespace-selector", &self.namespace_selector)?;
        let resource_label_selector = selector("resource-label-selector", &self.resource_label_selector)?;
        let namespaces_to_ignore: Vec<String> =
            self.namespaces_to_ignore.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect();
        if !global && namespace_selector.is_some() {
            tracing::warn!("namespace-selector is set but is only honored in global mode; ignoring it");
        }
        if !global && !namespaces_to_ignore.is_empty() {
            tracing::warn!(
                "namespaces-to-ignore is set but is only honored in global mode (watchGlobally=true); ignoring it."
            );
        }
        Ok(Scoping {
            configmaps: !ignored_resources.iter().any(|r| r == "configmaps"),
            secrets: !ignored_resources.iter().any(|r| r == "secrets"),
            jobs: !ignored_kinds.iter().any(|k| k == "jobs"),
            cronjobs: !ignored_kinds.iter().any(|k| k == "cronjobs"),
            namespace_selector: namespace_selector.filter(|_| global),
            namespaces_to_ignore: if global { namespaces_to_ignore } else { Vec::new() },
            resource_label_selector,
        })
    }

    /// Upstream precedence: `--namespaces`, then `KUBERNETES_NAMESPACE`, then all namespaces.
    pub fn watch_scope(&self) -> WatchScope {
        let listed: Vec<String> =
            self.namespaces.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect();
        if !listed.is_empty() {
            return WatchScope::Namespaces(listed);
        }
        match self.kubernetes_namespace.as_deref().map(str::trim) {
            Some(ns) if !ns.is_empty() => WatchScope::Namespaces(vec![ns.to_owned()]),
            _ => WatchScope::All,
        }
    }
}

#[cfg(test)]
mod tests;
