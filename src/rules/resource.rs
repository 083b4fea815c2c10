//! The resources whose changes trigger reloads, and the env var names derived from them.
//!
//! Pure: no client, no I/O.

use std::fmt;

use crate::constants::ENV_VAR_PREFIX;

/// Kind of a triggering resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigKind {
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Secret.
    Secret,
    /// secrets-store.csi.x-k8s.io/v1 SecretProviderClass (changes seen through its pod statuses).
    SecretProviderClass,
}

impl ConfigKind {
    /// Every kind.
    pub const ALL: [Self; 3] = [Self::ConfigMap, Self::Secret, Self::SecretProviderClass];

    /// Upstream's resource type string: `CONFIGMAP`, `SECRET`, `SECRETPROVIDERCLASS` (env var suffix, the v1
    /// `last-reloaded-from` `type` field, log and alert messages).
    pub fn upstream_type(self) -> &'static str {
        match self {
            Self::ConfigMap => "CONFIGMAP",
            Self::Secret => "SECRET",
            Self::SecretProviderClass => "SECRETPROVIDERCLASS",
        }
    }

    /// Upstream v2's lower-case kind (`configmap`, …), used by its `last-reloaded-from` shape.
    pub fn v2_kind(self) -> &'static str {
        match self {
            Self::ConfigMap => "configmap",
            Self::Secret => "secret",
            Self::SecretProviderClass => "secretproviderclass",
        }
    }

    /// The API group/version of its kind, as object references name it (`v1`, `secrets-store.csi.x-k8s.io/v1`).
    pub fn api_version(self) -> &'static str {
        match self {
            Self::ConfigMap | Self::Secret => "v1",
            Self::SecretProviderClass => "secrets-store.csi.x-k8s.io/v1",
        }
    }

    /// Parses either upstream spelling (`CONFIGMAP` or `configmap`).
    pub fn from_upstream(text: &str) -> Option<Self> {
        [Self::ConfigMap, Self::Secret, Self::SecretProviderClass]
            .into_iter()
            .find(|k| k.upstream_type().eq_ignore_ascii_case(text))
    }
}

impl fmt::Display for ConfigKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
            Self::SecretProviderClass => "SecretProviderClass",
        })
    }
}

/// Upstream `ConvertToEnvVarName`: upper-case, keep `[A-Z0-9]`, turn each run of other bytes into one `_`
/// (only after a kept character, so leading separators vanish and a trailing run leaves a trailing `_`).
pub fn sanitise_env_name(name: &str) -> String {
    let upper = name.to_uppercase();
    let mut out = String::with_capacity(upper.len());
    let mut last_kept = false;
    for b in upper.bytes() {
        if b.is_ascii_uppercase() || b.is_ascii_digit() {
            out.push(char::from(b));
            last_kept = true;
        } else {
            if last_kept {
                out.push('_');
            }
            last_kept = false;
        }
    }
    out
}

/// `STAKATER_<SANITISED NAME>_<TYPE>`, the env var the env-vars strategy writes (upstream `getEnvVarName`).
pub fn env_var_name(kind: ConfigKind, name: &str) -> String {
    format!("{ENV_VAR_PREFIX}{}_{}", sanitise_env_name(name), kind.upstream_type())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_var_names_match_upstream_examples() {
        assert_eq!(sanitise_env_name("www.stakater.com"), "WWW_STAKATER_COM");
        assert_eq!(env_var_name(ConfigKind::ConfigMap, "my-config"), "STAKATER_MY_CONFIG_CONFIGMAP");
        assert_eq!(env_var_name(ConfigKind::Secret, "db.creds"), "STAKATER_DB_CREDS_SECRET");
        assert_eq!(env_var_name(ConfigKind::SecretProviderClass, "my-spc"), "STAKATER_MY_SPC_SECRETPROVIDERCLASS");
    }

    #[test]
    fn separator_runs_collapse_leading_ones_vanish_trailing_one_stays() {
        assert_eq!(sanitise_env_name("--a..b--"), "A_B_");
        assert_eq!(sanitise_env_name("a-.-b"), "A_B");
        assert_eq!(sanitise_env_name("1abc"), "1ABC");
    }

    #[test]
    fn distinct_names_can_collide_as_upstream() {
        assert_eq!(sanitise_env_name("a-b"), sanitise_env_name("a.b"));
    }

    #[test]
    fn kinds_parse_from_both_upstream_spellings() {
        assert_eq!(ConfigKind::from_upstream("CONFIGMAP"), Some(ConfigKind::ConfigMap));
        assert_eq!(ConfigKind::from_upstream("secret"), Some(ConfigKind::Secret));
        assert_eq!(ConfigKind::from_upstream("pod"), None);
    }
}
