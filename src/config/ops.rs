//! Flags for operations: alerts and webhook mode, leader election, and upstream flags accepted for
//! compatibility.

use std::time::Duration;

use clap::ArgAction;

use super::{parse_bool, parse_duration};

/// Alerting and webhook flags (upstream v1 reads the `ALERT_*` env vars; v2 added the flags).
#[derive(clap::Args, Debug, Clone)]
pub struct AlertArgs {
    /// Send a webhook (`{"webhook":"update successful"}`) instead of reloading, for every qualifying change.
    #[arg(long, env = "WEBHOOK_URL", default_value = "")]
    pub webhook_url: String,
    /// Send an alert after every reload. Any value other than a boolean leaves alerts off with a warning, as
    /// upstream treats it (v1 compares with "true", v2's viper reads it as false): `ALERT_ON_RELOAD=on` must not
    /// stop the controller from starting.
    #[arg(long, env = "ALERT_ON_RELOAD", num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", action = ArgAction::Set)]
    pub alert_on_reload: String,
    /// `slack`, `teams`, `gchat`, or anything else for a plain-text webhook.
    #[arg(long, env = "ALERT_SINK", default_value = "")]
    pub alert_sink: String,
    /// Where alerts go (never logged).
    #[arg(long, env = "ALERT_WEBHOOK_URL", default_value = "", hide_env_values = true)]
    pub alert_webhook_url: String,
    /// Prefix for alert messages (`"<info> : <message>"`), also when set but empty, as upstream.
    #[arg(long, env = "ALERT_ADDITIONAL_INFO")]
    pub alert_additional_info: Option<String>,
    /// HTTP proxy for alerts (`ALERT_PROXY`, upstream v2; `ALERT_WEBHOOK_PROXY`, upstream v1, is read too).
    #[arg(long, env = "ALERT_PROXY", default_value = "")]
    pub alert_proxy: String,
    /// upstream v1's name of the proxy env var.
    #[arg(long = "alert-webhook-proxy", env = "ALERT_WEBHOOK_PROXY", default_value = "", hide = true)]
    pub alert_webhook_proxy: String,
    /// With a raw sink, send each alert as one JSON object instead of text (upstream v2).
    #[arg(long, env = "ALERT_STRUCTURED", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub alert_structured: bool,
}

impl AlertArgs {
    /// The alert destination when alerting is on and a URL is set.
    pub fn alerts(&self) -> Option<crate::alerts::AlertConfig> {
        let url = self.alert_webhook_url.trim();
        match parse_bool(&self.alert_on_reload) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(_) => {
                tracing::warn!(value = %self.alert_on_reload, "ALERT_ON_RELOAD is not true or false: alerts stay off (as upstream)");
                return None;
            }
        }
        if url.is_empty() {
            tracing::warn!("ALERT_WEBHOOK_URL env variable not provided");
            return None;
        }
        Some(crate::alerts::AlertConfig {
            url: url.to_owned(),
            sink: crate::alerts::Sink::parse(&self.alert_sink),
            additional: self.alert_additional_info.clone(),
            proxy: self.proxy(),
            structured: self.alert_structured,
        })
    }

    /// `--alert-proxy`/`ALERT_PROXY`, else upstream v1's `ALERT_WEBHOOK_PROXY`.
    fn proxy(&self) -> Option<String> {
        [&self.alert_proxy, &self.alert_webhook_proxy].into_iter().find(|p| !p.is_empty()).cloned()
    }

    /// The `--webhook-url` destination, if set.
    pub fn webhook(&self) -> Option<crate::alerts::AlertConfig> {
        let url = self.webhook_url.trim();
        (!url.is_empty()).then(|| crate::alerts::AlertConfig {
            url: url.to_owned(),
            sink: crate::alerts::Sink::Raw,
            additional: None,
            proxy: self.proxy(),
            structured: false,
        })
    }
}

/// Leader election flags: upstream v1's `--enable-ha` and lease name, v2's timing flags.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderArgs {
    /// Run several replicas; one leader reloads, the others keep their caches warm.
    #[arg(long, env = "ENABLE_HA", value_parser = parse_bool, num_args = 0..=1,
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
    /// Hand the Lease back on shutdown so a successor takes over at once (upstream v2; default true).
    #[arg(long, env = "LEADER_ELECTION_RELEASE_ON_CANCEL", value_parser = parse_bool, num_args = 0..=1,
          require_equals = true, default_value = "true", default_missing_value = "true", action = ArgAction::Set)]
    pub leader_election_release_on_cancel: bool,
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
    /// Release the Lease on shutdown.
    pub release_on_cancel: bool,
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
            release_on_cancel: self.leader_election_release_on_cancel,
        }))
    }
}

/// Upstream flags accepted so existing manifests keep starting, though they mean nothing here (pprof is a Go
/// runtime feature); a warning says so when one is turned on.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CompatOnly {
    /// pprof (a Go runtime feature; nothing to serve in Rust).
    #[arg(long, env = "ENABLE_PPROF", value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", action = ArgAction::Set)]
    pub enable_pprof: bool,
    /// pprof address (ignored).
    #[arg(long, env = "PPROF_ADDR", default_value = ":6060")]
    pub pprof_addr: String,
}

impl CompatOnly {
    /// Names of the flags that are turned on but have no effect.
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

/// Where to publish upstream v1's meta-info ConfigMap (env only, as upstream's chart sets them).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MetaInfoArgs {
    /// Namespace of the meta-info ConfigMap; unset means none is published (upstream v1).
    #[arg(long = "reloader-namespace", env = "RELOADER_NAMESPACE", default_value = "", hide = true)]
    pub namespace: String,
    /// Name of the Deployment running the controller, recorded in the meta-info ConfigMap.
    #[arg(long = "reloader-deployment-name", env = "RELOADER_DEPLOYMENT_NAME", default_value = "", hide = true)]
    pub deployment_name: String,
}
