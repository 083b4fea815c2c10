//! Command-line flags (upstream v1 names; every flag also from an env var, upper-case with `_`, as upstream v2
//! binds them) and their validation. Flags we add beyond upstream read `RELOADER_*` env vars so they cannot
//! collide with unrelated variables. Invalid values exit with status 2 and name the flag and accepted values.

use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use crate::{annotations::AnnotationKeys, constants::annotation as default, strategy::ReloadStrategy};

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

fn parse_duration(value: &str) -> Result<Duration, String> {
    crate::duration::parse_go_duration(value).map_err(|e| format!("{e} (a Go duration such as 500ms, 5s, 1m)"))
}

/// All flags.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "reloader",
    version,
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

    /// Log format: empty or `text` for text lines, `json` for JSON lines.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text", hide_default_value = true)]
    pub log_format: LogFormat,

    /// Log level: trace, debug, info, warning, error, fatal, panic.
    #[arg(long, env = "LOG_LEVEL", value_enum, default_value = "info")]
    pub log_level: LogLevel,

    /// Watch only these namespaces (comma-separated, repeatable). Default: `KUBERNETES_NAMESPACE` if set, else all.
    #[arg(long, env = "NAMESPACES", value_delimiter = ',', action = ArgAction::Append)]
    pub namespaces: Vec<String>,

    /// Single-namespace mode (upstream v1: set by the chart when `watchGlobally=false`).
    #[arg(long = "kubernetes-namespace", env = "KUBERNETES_NAMESPACE", hide = true)]
    pub kubernetes_namespace: Option<String>,

    /// Reload workloads when a resource they select is created (upstream: a string compared with "true").
    #[arg(long, env = "RELOAD_ON_CREATE", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub reload_on_create: bool,

    /// Reload workloads when a resource they select is deleted (env-vars: the STAKATER_* var is removed).
    #[arg(long, env = "RELOAD_ON_DELETE", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
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

    /// Changes to several resources of one workload within this window become one rollout (0 disables).
    #[arg(long, env = "RELOADER_COALESCE_WINDOW", default_value = "1s", value_parser = parse_duration)]
    pub coalesce_window: Duration,

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

    /// Reload Argo Rollouts (`--is-Argo-Rollouts=true` is upstream v1's spelling, also accepted).
    #[arg(long = "is-argo-rollouts", alias = "is-Argo-Rollouts", env = "IS_ARGO_ROLLOUTS", value_parser = parse_bool,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
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
    pub later: NotYetSupported,

    /// Number of workloads patched concurrently.
    #[arg(long, env = "RELOADER_WORKERS", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub workers: u16,

    /// Upper bound of the retry backoff for failed patches.
    #[arg(long, env = "RELOADER_MAX_RETRY_BACKOFF", default_value = "30s", value_parser = parse_duration)]
    pub max_retry_backoff: Duration,

    #[command(flatten)]
    pub annotations: AnnotationArgs,
}

/// Alerting and webhook flags (upstream v1 reads the `ALERT_*` env vars; v2 added the flags).
#[derive(clap::Args, Debug, Clone)]
pub struct AlertArgs {
    /// Send a webhook (`{"webhook":"update successful"}`) instead of reloading, for every qualifying change.
    #[arg(long, env = "WEBHOOK_URL", default_value = "")]
    pub webhook_url: String,
    /// Send an alert after every reload.
    #[arg(long, env = "ALERT_ON_RELOAD", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub alert_on_reload: bool,
    /// `slack`, `teams`, `gchat`, or anything else for a plain-text webhook.
    #[arg(long, env = "ALERT_SINK", default_value = "")]
    pub alert_sink: String,
    /// Where alerts go (never logged).
    #[arg(long, env = "ALERT_WEBHOOK_URL", default_value = "", hide_env_values = true)]
    pub alert_webhook_url: String,
    /// Prefix for alert messages (`"<info> : <message>"`), also when set but empty, as upstream.
    #[arg(long, env = "ALERT_ADDITIONAL_INFO")]
    pub alert_additional_info: Option<String>,
    /// HTTP proxy for alerts (`ALERT_WEBHOOK_PROXY` is upstream v1's name).
    #[arg(long, env = "ALERT_WEBHOOK_PROXY", default_value = "")]
    pub alert_proxy: String,
}

impl AlertArgs {
    /// The alert destination when alerting is on and a URL is set.
    pub fn alerts(&self) -> Option<crate::alerts::AlertConfig> {
        let url = self.alert_webhook_url.trim();
        if !self.alert_on_reload {
            return None;
        }
        if url.is_empty() {
            tracing::warn!("ALERT_WEBHOOK_URL env variable not provided");
            return None;
        }
        Some(crate::alerts::AlertConfig {
            url: url.to_owned(),
            sink: crate::alerts::Sink::parse(&self.alert_sink),
            additional: self.alert_additional_info.clone(),
            proxy: Some(self.alert_proxy.clone()).filter(|p| !p.is_empty()),
        })
    }

    /// The `--webhook-url` destination, if set.
    pub fn webhook(&self) -> Option<crate::alerts::AlertConfig> {
        let url = self.webhook_url.trim();
        (!url.is_empty()).then(|| crate::alerts::AlertConfig {
            url: url.to_owned(),
            sink: crate::alerts::Sink::Raw,
            additional: None,
            proxy: Some(self.alert_proxy.clone()).filter(|p| !p.is_empty()),
        })
    }
}

/// Leader election flags: upstream v1's `--enable-ha` and lease name, v2's timing flags.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderArgs {
    /// Run several replicas; one leader reloads, the others keep their caches warm.
    #[arg(long, env = "ENABLE_HA", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub enable_ha: bool,
    /// Lease name (upstream v1's).
    #[arg(long, env = "LEADER_ELECTION_ID", default_value = "stakater-reloader-lock")]
    pub leader_election_id: String,
    /// Lease namespace (default: `POD_NAMESPACE`).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", default_value = "")]
    pub leader_election_namespace: String,
    /// How long a lease is valid (whole seconds, ≥ 1s).
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long before expiry the leader must have renewed.
    #[arg(long, env = "LEADER_ELECTION_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: Duration,
    /// How often candidates retry.
    #[arg(long, env = "LEADER_ELECTION_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub leader_election_retry_period: Duration,
    /// This replica's identity (upstream: `POD_NAME`, required with `--enable-ha`).
    #[arg(long = "pod-name", env = "POD_NAME", default_value = "", hide = true)]
    pub pod_name: String,
    /// This replica's namespace (upstream: `POD_NAMESPACE`, required with `--enable-ha`).
    #[arg(long = "pod-namespace", env = "POD_NAMESPACE", default_value = "", hide = true)]
    pub pod_namespace: String,
}

/// Validated leader election settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElection {
    /// Lease name.
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// Lease duration in whole seconds.
    pub lease_seconds: u64,
    /// Renew deadline.
    pub renew_deadline: Duration,
    /// Retry period.
    pub retry_period: Duration,
}

impl LeaderArgs {
    /// `None` without `--enable-ha`; else the validated settings, with upstream's messages (v1 for the env
    /// vars, PR #1206 for the timings).
    pub fn validate(&self) -> Result<Option<LeaderElection>, String> {
        if !self.enable_ha {
            return Ok(None);
        }
        if self.pod_name.is_empty() {
            return Err("POD_NAME not set, cannot run in HA mode without POD_NAME set".into());
        }
        if self.pod_namespace.is_empty() && self.leader_election_namespace.is_empty() {
            return Err("POD_NAMESPACE not set, cannot run in HA mode without POD_NAMESPACE set".into());
        }
        let lease = self.leader_election_lease_duration;
        let (renew, retry) = (self.leader_election_renew_deadline, self.leader_election_retry_period);
        if lease.subsec_nanos() != 0 {
            return Err("--leader-election-lease-duration must be a whole number of seconds".into());
        }
        if lease < Duration::from_secs(1) {
            return Err("--leader-election-lease-duration must be at least 1s".into());
        }
        if lease.as_secs() > u64::from(i32::MAX.unsigned_abs()) {
            return Err(format!(
                "--leader-election-lease-duration must not exceed {}s, the largest value representable on the Lease API",
                i32::MAX
            ));
        }
        if renew.is_zero() {
            return Err("--leader-election-renew-deadline must be greater than zero".into());
        }
        if retry.is_zero() {
            return Err("--leader-election-retry-period must be greater than zero".into());
        }
        if lease <= renew {
            return Err("--leader-election-lease-duration must be greater than --leader-election-renew-deadline".into());
        }
        if renew.as_secs_f64() <= retry.as_secs_f64() * 1.2 {
            return Err("--leader-election-renew-deadline must be greater than --leader-election-retry-period multiplied by the jitter factor (1.2)".into());
        }
        let namespace = if self.leader_election_namespace.is_empty() {
            self.pod_namespace.clone()
        } else {
            self.leader_election_namespace.clone()
        };
        Ok(Some(LeaderElection {
            lease_name: self.leader_election_id.clone(),
            namespace,
            identity: self.pod_name.clone(),
            lease_seconds: lease.as_secs(),
            renew_deadline: renew,
            retry_period: retry,
        }))
    }
}

/// Upstream flags accepted so existing manifests keep starting, whose features are not implemented yet; a
/// warning says so when one is turned on.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NotYetSupported {
    /// pprof (a Go runtime feature; nothing to serve in Rust).
    #[arg(long, env = "ENABLE_PPROF", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub enable_pprof: bool,
    /// pprof address (ignored).
    #[arg(long, env = "PPROF_ADDR", default_value = ":6060")]
    pub pprof_addr: String,
}

impl NotYetSupported {
    /// Names of the flags that are turned on but not implemented.
    pub fn requested(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (on, name) in [(self.enable_pprof, "--enable-pprof")] {
            if on {
                out.push(name);
            }
        }
        out
    }
}

/// Annotation key overrides (upstream v1 flags, plus v2's exclude and SecretProviderClass ones).
#[derive(clap::Args, Debug, Clone)]
pub struct AnnotationArgs {
    /// Auto annotation key.
    #[arg(long, env = "AUTO_ANNOTATION", default_value = default::AUTO)]
    pub auto_annotation: String,
    /// ConfigMap typed-auto annotation key.
    #[arg(long, env = "CONFIGMAP_AUTO_ANNOTATION", default_value = default::CONFIGMAP_AUTO)]
    pub configmap_auto_annotation: String,
    /// Secret typed-auto annotation key.
    #[arg(long, env = "SECRET_AUTO_ANNOTATION", default_value = default::SECRET_AUTO)]
    pub secret_auto_annotation: String,
    /// SecretProviderClass typed-auto annotation key.
    #[arg(long, env = "SECRETPROVIDERCLASS_AUTO_ANNOTATION", default_value = default::SECRETPROVIDERCLASS_AUTO)]
    pub secretproviderclass_auto_annotation: String,
    /// ConfigMap named-list annotation key.
    #[arg(long, env = "CONFIGMAP_ANNOTATION", default_value = default::CONFIGMAP_RELOAD)]
    pub configmap_annotation: String,
    /// Secret named-list annotation key.
    #[arg(long, env = "SECRET_ANNOTATION", default_value = default::SECRET_RELOAD)]
    pub secret_annotation: String,
    /// SecretProviderClass named-list annotation key.
    #[arg(long, env = "SECRETPROVIDERCLASS_ANNOTATION", default_value = default::SECRETPROVIDERCLASS_RELOAD)]
    pub secretproviderclass_annotation: String,
    /// ConfigMap exclude-list annotation key.
    #[arg(long, env = "CONFIGMAP_EXCLUDE_ANNOTATION", default_value = default::CONFIGMAP_EXCLUDE)]
    pub configmap_exclude_annotation: String,
    /// Secret exclude-list annotation key.
    #[arg(long, env = "SECRET_EXCLUDE_ANNOTATION", default_value = default::SECRET_EXCLUDE)]
    pub secret_exclude_annotation: String,
    /// SecretProviderClass exclude-list annotation key.
    #[arg(long, env = "SECRETPROVIDERCLASS_EXCLUDE_ANNOTATION", default_value = default::SECRETPROVIDERCLASS_EXCLUDE)]
    pub secretproviderclass_exclude_annotation: String,
    /// Search annotation key (on workloads).
    #[arg(long, env = "AUTO_SEARCH_ANNOTATION", default_value = default::SEARCH)]
    pub auto_search_annotation: String,
    /// Match annotation key (on resources).
    #[arg(long, env = "SEARCH_MATCH_ANNOTATION", default_value = default::MATCH)]
    pub search_match_annotation: String,
    /// Ignore annotation key (on resources).
    #[arg(long, env = "IGNORE_ANNOTATION", default_value = default::IGNORE)]
    pub ignore_annotation: String,
    /// Pause-period annotation key (on Deployments).
    #[arg(long, env = "PAUSE_DEPLOYMENT_ANNOTATION", default_value = default::PAUSE_PERIOD)]
    pub pause_deployment_annotation: String,
    /// Paused-at annotation key (written on Deployments).
    #[arg(long, env = "PAUSE_DEPLOYMENT_TIME_ANNOTATION", default_value = default::PAUSED_AT)]
    pub pause_deployment_time_annotation: String,
}

impl AnnotationArgs {
    /// The keys in use.
    pub fn keys(&self) -> AnnotationKeys {
        AnnotationKeys {
            auto: self.auto_annotation.clone(),
            typed_auto: [
                self.configmap_auto_annotation.clone(),
                self.secret_auto_annotation.clone(),
                self.secretproviderclass_auto_annotation.clone(),
            ],
            named: [
                self.configmap_annotation.clone(),
                self.secret_annotation.clone(),
                self.secretproviderclass_annotation.clone(),
            ],
            exclude: [
                self.configmap_exclude_annotation.clone(),
                self.secret_exclude_annotation.clone(),
                self.secretproviderclass_exclude_annotation.clone(),
            ],
            search: self.auto_search_annotation.clone(),
            matches: self.search_match_annotation.clone(),
            ignore: self.ignore_annotation.clone(),
            pause_period: self.pause_deployment_annotation.clone(),
            paused_at: self.pause_deployment_time_annotation.clone(),
        }
    }
}

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
    /// An invalid label selector.
    #[error("--{flag}: {source}")]
    Selector {
        /// The flag.
        flag: &'static str,
        /// Why.
        source: crate::selector::SelectorError,
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
            if t != "jobs" && t != "cronjobs" {
                return Err(ConfigError::UnknownWorkloadType(t.to_owned()));
            }
            ignored_kinds.push(t);
        }
        let global = self.watch_scope() == WatchScope::All;
        let selector =
            |flag, v: &[String]| crate::selector::normalise(v).map_err(|source| ConfigError::Selector { flag, source });
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
            jobs: !ignored_kinds.contains(&"jobs"),
            cronjobs: !ignored_kinds.contains(&"cronjobs"),
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
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("reloader").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_match_upstream() {
        let a = parse(&[]).expect("defaults parse");
        assert!(!a.auto_reload_all);
        assert_eq!(a.reload_strategy, ReloadStrategy::EnvVars);
        assert_eq!(a.log_level, LogLevel::Info);
        assert_eq!(a.annotations.keys(), AnnotationKeys::default());
    }

    #[test]
    fn bool_flags_take_bare_or_explicit_values() {
        assert!(parse(&["--auto-reload-all"]).expect("bare").auto_reload_all);
        assert!(parse(&["--auto-reload-all=true"]).expect("=true").auto_reload_all);
        assert!(!parse(&["--auto-reload-all=false"]).expect("=false").auto_reload_all);
        let err = parse(&["--auto-reload-all=maybe"]).expect_err("invalid bool");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--auto-reload-all"), "{err}");
    }

    #[test]
    fn invalid_strategy_exits_2_naming_flag_and_values() {
        let err = parse(&["--reload-strategy=rolling"]).expect_err("invalid");
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(
            text.contains("--reload-strategy") && text.contains("env-vars") && text.contains("annotations"),
            "{text}"
        );
    }

    #[test]
    fn unknown_flags_exit_2() {
        assert_eq!(parse(&["--no-such-flag"]).expect_err("unknown").exit_code(), 2);
    }

    #[test]
    fn log_flags_accept_upstream_spellings() {
        let a = parse(&["--log-format=json", "--log-level=warning"]).expect("parse");
        assert_eq!((a.log_format, a.log_level), (LogFormat::Json, LogLevel::Warning));
        assert_eq!(parse(&["--log-format="]).expect("empty format").log_format, LogFormat::Text);
        assert_eq!(parse(&["--log-level=warn"]).expect("warn").log_level, LogLevel::Warning);
        assert_eq!(parse(&["--log-level=loud"]).expect_err("bad level").exit_code(), 2);
    }

    #[test]
    fn annotation_keys_are_overridable() {
        let a = parse(&["--auto-annotation=example.com/auto", "--configmap-annotation=example.com/cm"]).expect("parse");
        let keys = a.annotations.keys();
        assert_eq!(keys.auto, "example.com/auto");
        assert_eq!(keys.named[0], "example.com/cm");
    }

    #[test]
    fn resources_to_ignore_accepts_one_type_case_insensitively_with_upstreams_messages() {
        let s = parse(&["--resources-to-ignore=ConfigMaps"]).expect("parse").scoping().expect("valid");
        assert!(!s.configmaps && s.secrets);
        let e = parse(&["--resources-to-ignore=configmaps,secrets"]).expect("parse").scoping().expect_err("both");
        assert_eq!(e.to_string(), "'resources-to-ignore' only accepts 'configmaps' or 'secrets', not both");
        let e = parse(&["--resources-to-ignore=pods"]).expect("parse").scoping().expect_err("unknown");
        assert_eq!(e.to_string(), "'resources-to-ignore' only accepts 'configmaps' or 'secrets', not 'pods'");
    }

    #[test]
    fn ignored_workload_types_are_validated_not_silently_skipped() {
        let s = parse(&["--ignored-workload-types=jobs,cronjobs"]).expect("parse").scoping().expect("valid");
        assert!(!s.jobs && !s.cronjobs);
        let e = parse(&["--ignored-workload-types=deployments"]).expect("parse").scoping().expect_err("invalid");
        assert_eq!(e.to_string(), "'ignored-workload-types' accepts 'jobs', 'cronjobs', or both, not 'deployments'");
    }

    #[test]
    fn selectors_are_normalised_and_namespace_scoping_flags_need_global_mode() {
        let s = parse(&["--namespace-selector=\"team:a,env=prod\"", "--resource-label-selector=reload:*"])
            .expect("parse")
            .scoping()
            .expect("valid");
        assert_eq!(s.namespace_selector.as_deref(), Some("team=a,env=prod"));
        assert_eq!(s.resource_label_selector.as_deref(), Some("reload"));
        let s = parse(&["--namespaces=a", "--namespace-selector=x=y", "--namespaces-to-ignore=b"])
            .expect("parse")
            .scoping()
            .expect("valid");
        assert_eq!((s.namespace_selector, s.namespaces_to_ignore), (None, vec![]));
        let e = parse(&["--namespace-selector=a=b=c"]).expect("parse").scoping().expect_err("invalid");
        assert!(e.to_string().starts_with("--namespace-selector: invalid selector"), "{e}");
    }

    #[test]
    fn leader_election_is_validated_like_upstream_pr_1206() {
        let ha = |extra: &[&str]| {
            let mut args = vec!["--enable-ha", "--pod-name=p", "--pod-namespace=ns"];
            args.extend_from_slice(extra);
            parse(&args).expect("parse").leader.validate()
        };
        let ok = ha(&[]).expect("defaults are valid").expect("enabled");
        assert_eq!(
            (ok.lease_name.as_str(), ok.namespace.as_str(), ok.lease_seconds),
            ("stakater-reloader-lock", "ns", 15)
        );
        assert_eq!(
            ha(&["--leader-election-lease-duration=1500ms"]),
            Err("--leader-election-lease-duration must be a whole number of seconds".into())
        );
        assert_eq!(
            ha(&["--leader-election-lease-duration=0s"]),
            Err("--leader-election-lease-duration must be at least 1s".into())
        );
        assert_eq!(
            ha(&["--leader-election-lease-duration=10s"]),
            Err("--leader-election-lease-duration must be greater than --leader-election-renew-deadline".into())
        );
        assert!(
            ha(&["--leader-election-renew-deadline=2s"]).expect_err("renew vs retry").contains("jitter factor (1.2)")
        );
        assert_eq!(
            parse(&["--enable-ha", "--pod-namespace=ns"]).expect("parse").leader.validate(),
            Err("POD_NAME not set, cannot run in HA mode without POD_NAME set".into())
        );
        assert_eq!(parse(&[]).expect("parse").leader.validate(), Ok(None));
    }

    #[test]
    fn namespaces_win_over_kubernetes_namespace() {
        let a = parse(&["--namespaces=a, b", "--namespaces=c", "--kubernetes-namespace=x"]).expect("parse");
        assert_eq!(a.watch_scope(), WatchScope::Namespaces(vec!["a".into(), "b".into(), "c".into()]));
        let a = parse(&["--kubernetes-namespace=x"]).expect("parse");
        assert_eq!(a.watch_scope(), WatchScope::Namespaces(vec!["x".into()]));
        assert_eq!(parse(&[]).expect("parse").watch_scope(), WatchScope::All);
    }
}
