//! The annotation-key flags: every key a workload or resource annotation uses can be renamed, as upstream's
//! flags allow (plus v2's exclude and SecretProviderClass keys, and ours).

use crate::constants::annotation as default;
use crate::rules::annotations::AnnotationKeys;

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
    /// Key-level reloads annotation key (ours; values `keys-used`, `any-key`).
    #[arg(long, env = "RELOADER_RELOAD_ON_ANNOTATION", default_value = default::RELOAD_ON)]
    pub reload_on_annotation: String,
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
            reload_on: self.reload_on_annotation.clone(),
        }
    }
}
