//! What a pod spec uses: for every ConfigMap, Secret and SecretProviderClass it names, the container the
//! env-vars strategy writes to and how the resource is used. Follows upstream v1's container lookup
//! (`getContainerUsingResource`, reloader-behaviour.md §4) so the env var lands where upstream puts it.
//!
//! Pure: no client, no I/O.

use std::{collections::BTreeSet, fmt, sync::Arc};

use k8s_openapi::api::core::v1::{Container, KeyToPath, PodSpec, Volume};

use crate::rules::resource::ConfigKind;

/// How a pod spec uses a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A `configMap`/`secret` volume mounted by a container.
    Volume,
    /// A projected volume source, mounted by a container.
    ProjectedVolume,
    /// A CSI volume with `volumeAttributes.secretProviderClass`.
    CsiVolume,
    /// `env[].valueFrom.configMapKeyRef` / `secretKeyRef`.
    EnvValueFrom,
    /// `envFrom[].configMapRef` / `secretRef`.
    EnvFrom,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Volume => "volume",
            Self::ProjectedVolume => "projected volume",
            Self::CsiVolume => "CSI volume",
            Self::EnvValueFrom => "env valueFrom",
            Self::EnvFrom => "envFrom",
        })
    }
}

/// One resource used by a pod spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigUse {
    /// Resource kind.
    pub kind: ConfigKind,
    /// Resource name (same namespace as the workload).
    pub name: String,
    /// The container that receives the env var: the one using it, or the first container when only an init
    /// container uses it (upstream maps init-container uses to `containers[0]`).
    pub container: String,
    /// How it is used.
    pub via: Via,
    /// True when the user is an init container.
    pub init_container: bool,
    /// The keys the pod reads, when it reads only some (`env[].valueFrom` keys, volume and projected `items`);
    /// `None` when it reads every key (`envFrom`, a whole volume) — or the resource has no keys (CSI).
    pub keys: Option<KeySet>,
}

/// Key names of a ConfigMap or Secret, sorted and unique.
pub type KeySet = Arc<[String]>;

/// Every resource a pod spec uses, one entry per (kind, name), in a stable order.
pub fn config_uses(spec: &PodSpec) -> Vec<ConfigUse> {
    let mut names = BTreeSet::new();
    for v in spec.volumes.iter().flatten() {
        for (kind, name, _) in volume_sources(v) {
            names.insert((kind, name));
        }
    }
    for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
        for (kind, name, _) in env_sources(c) {
            names.insert((kind, name));
        }
    }
    names
        .into_iter()
        .filter_map(|(kind, name)| {
            find_use(spec, kind, name).map(|u| ConfigUse { keys: consumed_keys(spec, kind, name), ..u })
        })
        .collect()
}

/// The keys of `kind/name` the pod reads, over every container and init container; `None` as soon as one use
/// reads them all. Volumes count when some container mounts them (as [`find_use`]).
fn consumed_keys(spec: &PodSpec, kind: ConfigKind, name: &str) -> Option<KeySet> {
    let mut keys = BTreeSet::new();
    let containers = || spec.containers.iter().chain(spec.init_containers.iter().flatten());
    // `items` absent or empty: kubelet projects every key.
    let mut add_items = |items: Option<&Vec<KeyToPath>>| match items.filter(|i| !i.is_empty()) {
        Some(items) => {
            keys.extend(items.iter().map(|i| i.key.clone()));
            true
        }
        None => false,
    };
    for v in spec.volumes.iter().flatten().filter(|v| containers().any(|c| mounts(c, &v.name))) {
        let whole = match kind {
            ConfigKind::ConfigMap => {
                v.config_map.as_ref().filter(|s| s.name == name).map(|s| !add_items(s.items.as_ref()))
            }
            ConfigKind::Secret => v
                .secret
                .as_ref()
                .filter(|s| s.secret_name.as_deref() == Some(name))
                .map(|s| !add_items(s.items.as_ref())),
            ConfigKind::SecretProviderClass => return None,
        };
        if whole == Some(true) {
            return None;
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            let items = match kind {
                ConfigKind::ConfigMap => src.config_map.as_ref().filter(|s| s.name == name).map(|s| s.items.as_ref()),
                _ => src.secret.as_ref().filter(|s| s.name == name).map(|s| s.items.as_ref()),
            };
            if let Some(items) = items
                && !add_items(items)
            {
                return None;
            }
        }
    }
    for c in containers() {
        for e in c.env.iter().flatten() {
            let from = e.value_from.as_ref();
            let key = match kind {
                ConfigKind::ConfigMap => {
                    from.and_then(|f| f.config_map_key_ref.as_ref()).filter(|r| r.name == name).map(|r| &r.key)
                }
                _ => from.and_then(|f| f.secret_key_ref.as_ref()).filter(|r| r.name == name).map(|r| &r.key),
            };
            keys.extend(key.cloned());
        }
        for e in c.env_from.iter().flatten() {
            let whole = match kind {
                ConfigKind::ConfigMap => e.config_map_ref.as_ref().is_some_and(|r| r.name == name),
                _ => e.secret_ref.as_ref().is_some_and(|r| r.name == name),
            };
            if whole {
                return None;
            }
        }
    }
    (!keys.is_empty()).then(|| keys.into_iter().collect())
}

/// Upstream v1 lookup for one resource: volume first, then env; containers before init containers.
fn find_use(spec: &PodSpec, kind: ConfigKind, name: &str) -> Option<ConfigUse> {
    let first = spec.containers.first()?.name.clone();
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let make = |container: String, via, init_container| ConfigUse {
        kind,
        name: name.to_owned(),
        container,
        via,
        init_container,
        keys: None,
    };

    // 1. The first volume whose source names the resource, then the first container mounting it.
    let volume = spec.volumes.iter().flatten().find_map(|v| {
        volume_sources(v).into_iter().find(|(k, n, _)| *k == kind && *n == name).map(|(_, _, via)| (v, via))
    });
    if let Some((volume, via)) = volume {
        if let Some(c) = spec.containers.iter().find(|c| mounts(c, &volume.name)) {
            return Some(make(c.name.clone(), via, false));
        }
        if init.iter().any(|c| mounts(c, &volume.name)) {
            return Some(make(first, via, true));
        }
    }
    // 2. The first container with an env reference; init containers map to the first container.
    let env_via =
        |c: &Container| env_sources(c).into_iter().find(|(k, n, _)| *k == kind && *n == name).map(|(_, _, via)| via);
    if let Some((c, via)) = spec.containers.iter().find_map(|c| env_via(c).map(|via| (c, via))) {
        return Some(make(c.name.clone(), via, false));
    }
    if let Some(via) = init.iter().find_map(env_via) {
        return Some(make(first, via, true));
    }
    None
}

fn mounts(c: &Container, volume: &str) -> bool {
    c.volume_mounts.iter().flatten().any(|m| m.name == volume)
}

fn volume_sources(v: &Volume) -> Vec<(ConfigKind, &str, Via)> {
    let mut out = Vec::new();
    if let Some(name) = v.config_map.as_ref().map(|s| s.name.as_str()) {
        out.push((ConfigKind::ConfigMap, name, Via::Volume));
    }
    if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) {
        out.push((ConfigKind::Secret, name, Via::Volume));
    }
    for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
        if let Some(cm) = &src.config_map {
            out.push((ConfigKind::ConfigMap, cm.name.as_str(), Via::ProjectedVolume));
        }
        if let Some(s) = &src.secret {
            out.push((ConfigKind::Secret, s.name.as_str(), Via::ProjectedVolume));
        }
    }
    if let Some(spc) =
        v.csi.as_ref().and_then(|c| c.volume_attributes.as_ref()).and_then(|a| a.get("secretProviderClass"))
    {
        out.push((ConfigKind::SecretProviderClass, spc.as_str(), Via::CsiVolume));
    }
    out
}

fn env_sources(c: &Container) -> Vec<(ConfigKind, &str, Via)> {
    let mut out = Vec::new();
    for e in c.env.iter().flatten() {
        let Some(from) = &e.value_from else { continue };
        if let Some(r) = &from.config_map_key_ref {
            out.push((ConfigKind::ConfigMap, r.name.as_str(), Via::EnvValueFrom));
        }
        if let Some(r) = &from.secret_key_ref {
            out.push((ConfigKind::Secret, r.name.as_str(), Via::EnvValueFrom));
        }
    }
    for e in c.env_from.iter().flatten() {
        if let Some(r) = &e.config_map_ref {
            out.push((ConfigKind::ConfigMap, r.name.as_str(), Via::EnvFrom));
        }
        if let Some(r) = &e.secret_ref {
            out.push((ConfigKind::Secret, r.name.as_str(), Via::EnvFrom));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).expect("valid pod spec")
    }

    fn uses(json: serde_json::Value) -> Vec<(ConfigKind, String, String, Via, bool)> {
        config_uses(&spec(json)).into_iter().map(|u| (u.kind, u.name, u.container, u.via, u.init_container)).collect()
    }

    #[test]
    fn finds_env_value_from_env_from_and_volumes_in_containers() {
        let got = uses(serde_json::json!({
            "containers": [
                {"name": "a", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}}]},
                {"name": "b", "envFrom": [{"secretRef": {"name": "sec-envfrom"}}],
                 "volumeMounts": [{"name": "vol", "mountPath": "/v"}, {"name": "proj", "mountPath": "/p"}]}
            ],
            "volumes": [
                {"name": "vol", "configMap": {"name": "cm-vol"}},
                {"name": "proj", "projected": {"sources": [{"secret": {"name": "sec-proj"}}, {"configMap": {"name": "cm-proj"}}]}}
            ]
        }));
        assert_eq!(
            got,
            vec![
                (ConfigKind::ConfigMap, "cm-env".into(), "a".into(), Via::EnvValueFrom, false),
                (ConfigKind::ConfigMap, "cm-proj".into(), "b".into(), Via::ProjectedVolume, false),
                (ConfigKind::ConfigMap, "cm-vol".into(), "b".into(), Via::Volume, false),
                (ConfigKind::Secret, "sec-envfrom".into(), "b".into(), Via::EnvFrom, false),
                (ConfigKind::Secret, "sec-proj".into(), "b".into(), Via::ProjectedVolume, false),
            ]
        );
    }

    #[test]
    fn init_container_uses_map_to_the_first_container() {
        let got = uses(serde_json::json!({
            "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "cm"}}],
                                "volumeMounts": [{"name": "s", "mountPath": "/s"}]}],
            "containers": [{"name": "main"}, {"name": "side"}],
            "volumes": [{"name": "s", "secret": {"secretName": "sec"}}]
        }));
        assert_eq!(
            got,
            vec![
                (ConfigKind::ConfigMap, "cm".into(), "main".into(), Via::EnvFrom, true),
                (ConfigKind::Secret, "sec".into(), "main".into(), Via::Volume, true),
            ]
        );
    }

    #[test]
    fn an_unmounted_volume_does_not_count_as_a_use() {
        // upstream v1: a volume defined but mounted by no container is not a reference.
        let got = uses(serde_json::json!({
            "containers": [{"name": "main"}],
            "volumes": [{"name": "v", "configMap": {"name": "cm"}}]
        }));
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn volume_use_wins_over_env_use_and_picks_the_mounting_container() {
        let got = uses(serde_json::json!({
            "containers": [
                {"name": "env-user", "envFrom": [{"configMapRef": {"name": "cm"}}]},
                {"name": "mounter", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}
            ],
            "volumes": [{"name": "v", "configMap": {"name": "cm"}}]
        }));
        assert_eq!(got, vec![(ConfigKind::ConfigMap, "cm".into(), "mounter".into(), Via::Volume, false)]);
    }

    #[test]
    fn csi_volume_names_its_secret_provider_class() {
        let got = uses(serde_json::json!({
            "containers": [{"name": "main", "volumeMounts": [{"name": "s", "mountPath": "/mnt"}]}],
            "volumes": [{"name": "s", "csi": {"driver": "secrets-store.csi.k8s.io", "volumeAttributes": {"secretProviderClass": "spc"}}}]
        }));
        assert_eq!(got, vec![(ConfigKind::SecretProviderClass, "spc".into(), "main".into(), Via::CsiVolume, false)]);
    }

    #[test]
    fn a_spec_without_containers_uses_nothing() {
        assert!(uses(serde_json::json!({"containers": []})).is_empty());
    }
}

#[cfg(test)]
#[path = "references_key_tests.rs"]
mod key_tests;
