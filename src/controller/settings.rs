//! The controller's settings, resolved from validated flags.

use std::{sync::Arc, time::Duration};

use super::{Source, WatchPlan};
use crate::rules::{
    annotations::AnnotationKeys, decision::DecisionSettings, resource::ConfigKind, strategy::ReloadStrategy,
};
use crate::{
    config::{Args, ConfigError},
    workload::{Watched, WorkloadKind},
};

/// What the controller needs to know from the flags.
#[derive(Clone, Debug)]
pub struct Settings {
    /// What to watch.
    pub watch: WatchPlan,
    /// `--namespaces-to-ignore` (global mode only).
    pub namespaces_to_ignore: Vec<String>,
    /// `--reload-on-create`.
    pub reload_on_create: bool,
    /// `--reload-on-delete`.
    pub reload_on_delete: bool,
    /// `--sync-after-restart`.
    pub sync_after_restart: bool,
    /// Alerts after reloads (`ALERT_*`).
    pub alerts: Option<crate::alerts::AlertConfig>,
    /// `--webhook-url`: send instead of reloading.
    pub webhook: Option<crate::alerts::AlertConfig>,
    /// Kinds watched only once their API is served (Argo Rollouts, DeploymentConfigs).
    pub optional: Vec<OptionalKind>,
    /// How often missing optional APIs are looked for.
    pub discovery_interval: Duration,
    /// `--coalesce-window`: the longest a change waits for others.
    pub coalesce_window: Duration,
    /// `--coalesce-quiet`: a change waits until none has arrived for this long.
    pub coalesce_quiet: Duration,
    /// `--max-concurrent-rollouts` (0: unlimited) and `--rollout-timeout`.
    pub rollout_budget: (usize, Duration),
    /// `--halt-on-failed-rollout`.
    pub halt_on_failed_rollout: bool,
    /// Annotation keys.
    pub keys: Arc<AnnotationKeys>,
    /// `--reload-strategy`.
    pub strategy: ReloadStrategy,
    /// `--rollout-strategy`: for workloads whose `rollout-strategy` annotation names none.
    pub rollout_strategy: crate::rules::strategy::RolloutStrategy,
    /// Decision settings (`--auto-reload-all`).
    pub decisions: DecisionSettings,
    /// Concurrent patches.
    pub workers: usize,
    /// Retry backoff cap.
    pub max_backoff: Duration,
    /// Workload writes per second (`--kube-api-qps`; 0: unlimited) and the burst before it applies.
    pub write_qps: f64,
    /// `--kube-api-burst`.
    pub write_burst: u32,
    /// The Lease name (`--leader-election-id`), the `name` label of `leader_election_master_status`.
    pub lease_name: String,
    /// `--hash-key-secret`, as given.
    pub hash_key_secret: Option<String>,
    /// The key loaded from it ([`Settings::load_hash_key`]).
    pub hash_key: Option<crate::hash_key::HashKey>,
    /// The controller's own namespace (`RELOADER_NAMESPACE`, else `POD_NAMESPACE`; empty when unknown): where
    /// owed Job recreations are kept.
    pub own_namespace: String,
}

/// A kind whose API may not be installed: watched once discovery finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionalKind {
    /// What to watch once the API is served.
    pub sources: Vec<Source>,
    /// API group/version, e.g. `argoproj.io/v1alpha1`.
    pub group_version: &'static str,
    /// Resource plural, e.g. `rollouts`.
    pub plural: &'static str,
    /// A configured kind's slot (`--workload-kind`): discovery finds it by its kind and learns its plural.
    pub configured: Option<u8>,
}

impl Settings {
    /// Validates the flags (upstream's rules and messages) and resolves them.
    pub fn from_args(args: &Args) -> Result<Self, ConfigError> {
        let scoping = args.scoping()?;
        let mut sources = Vec::new();
        if scoping.configmaps {
            sources.push(Source::Config(ConfigKind::ConfigMap));
        }
        if scoping.secrets {
            sources.push(Source::Config(ConfigKind::Secret));
        }
        let mut optional = Vec::new();
        let configured: Vec<_> = args
            .workload_kinds
            .iter()
            .filter(|v| !v.trim().is_empty())
            .map(|v| crate::rules::configured_kinds::ConfiguredKind::parse(v))
            .collect::<Result<_, _>>()?;
        crate::rules::configured_kinds::register(configured, crate::workload::kinds::is_built_in)?;
        for (slot, kind) in crate::rules::configured_kinds::registered().iter().enumerate() {
            let slot = u8::try_from(slot).map_err(|_| crate::rules::configured_kinds::KindError::TooMany)?;
            optional.push(OptionalKind {
                sources: vec![Source::Workload(WorkloadKind::Configured(slot))],
                group_version: kind.api_version,
                plural: crate::rules::configured_kinds::plural(slot),
                configured: Some(slot),
            });
        }
        // The built-in kinds, each as its facts say: watched always, unless a flag leaves it out, or once its API
        // is served when a flag asks for it.
        for kind in WorkloadKind::ALL {
            let facts = kind.facts();
            let watched = match facts.watched {
                Watched::Always => true,
                Watched::UnlessCronJobsIgnored => scoping.cronjobs,
                Watched::UnlessJobsIgnored => scoping.jobs,
                Watched::ArgoRollouts => args.is_argo_rollouts,
                Watched::OpenShift => {
                    !matches!(args.is_openshift.trim().to_ascii_lowercase().as_str(), "false" | "0" | "no")
                }
                // Its slot, above.
                Watched::Configured => false,
            };
            if !watched {
                continue;
            }
            if facts.served_by_crd() {
                optional.push(OptionalKind {
                    sources: vec![Source::Workload(kind)],
                    group_version: facts.api_version,
                    plural: facts.plural(),
                    configured: None,
                });
            } else {
                sources.push(Source::Workload(kind));
            }
        }
        if args.enable_csi_integration {
            optional.push(OptionalKind {
                sources: vec![Source::Config(ConfigKind::SecretProviderClass), Source::SecretProviderClasses],
                group_version: "secrets-store.csi.x-k8s.io/v1",
                plural: "secretproviderclasspodstatuses",
                configured: None,
            });
        }
        Ok(Self {
            optional,
            discovery_interval: args.discovery_interval,
            watch: WatchPlan {
                scope: args.watch_scope(),
                sources,
                resource_label_selector: scoping.resource_label_selector,
                namespace_selector: scoping.namespace_selector,
                namespace_windows: args.namespace_reload_windows,
                namespace_rules: args.namespace_rules,
            },
            namespaces_to_ignore: scoping.namespaces_to_ignore,
            reload_on_create: args.reload_on_create,
            reload_on_delete: args.reload_on_delete,
            // upstream v1 acts on --sync-after-restart only together with --reload-on-create (it replays the
            // create events); alone it does nothing there, so a migrating user must not get a mass rollout here.
            sync_after_restart: args.sync_after_restart && args.reload_on_create,
            coalesce_window: args.coalesce_window,
            coalesce_quiet: args.coalesce_quiet,
            rollout_budget: (args.max_concurrent_rollouts, args.rollout_timeout),
            halt_on_failed_rollout: args.halt_on_failed_rollout,
            alerts: args.alerts.alerts(),
            webhook: args.alerts.webhook(),
            keys: Arc::new(args.annotations.keys()),
            strategy: args.reload_strategy,
            rollout_strategy: args.rollout_strategy,
            decisions: DecisionSettings {
                auto_reload_all: args.auto_reload_all,
                keys_used: args.reload_on == crate::rules::annotations::RELOAD_ON_KEYS_USED,
                namespace: Default::default(),
                cross_namespace: args.allow_cross_namespace_references,
            },
            workers: usize::from(args.workers),
            max_backoff: args.max_retry_backoff,
            lease_name: args.leader.leader_election_id.clone(),
            write_qps: args.kube_api_qps,
            write_burst: args.kube_api_burst,
            hash_key_secret: args.hash_key_secret.clone(),
            hash_key: None,
            own_namespace: Some(&args.meta_info.namespace)
                .filter(|n| !n.is_empty())
                .unwrap_or(&args.leader.pod_namespace)
                .clone(),
        })
    }

    /// Reads the `--hash-key-secret` key, when one is named.
    pub async fn load_hash_key(&mut self, client: &kube::Client) -> Result<(), crate::hash_key::HashKeyError> {
        if let Some(reference) = &self.hash_key_secret {
            self.hash_key = Some(crate::hash_key::load(client, reference).await?);
        }
        Ok(())
    }
}
