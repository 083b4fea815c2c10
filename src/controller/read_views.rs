//! Key-level reloads: a resource whose consumed keys' hash the index lacks (a workload opted in, or arrived,
//! after the resource was last seen) is read once, and the views its key-level readers want are computed from it.
//! Its data is dropped here; only the hashes reach the index.
//!
//! The read is a LIST of that one name (a field selector), not a GET: the controller's RBAC grants `list` and
//! `watch` on ConfigMaps and Secrets, as its watches need, and nothing more (the chart's rules; a GET was refused
//! with them, retried forever, and held back the workload's other reloads — tests/rbac.rs).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Resource, api::ListParams};
use serde::de::DeserializeOwned;

use super::{Context, configmap_facts, secret_facts};
use crate::index::{ConfigKey, configmap_views, secret_views};
use crate::rules::resource::ConfigKind;

/// Reads each resource and adds the wanted views of it to the index.
pub(super) async fn read_views(ctx: &Context, configs: &[ConfigKey]) -> Result<(), kube::Error> {
    for config in configs {
        let wanted = ctx.stream_context.key_registry.wanted(config);
        if wanted.is_empty() {
            continue;
        }
        let keys = &ctx.settings.keys;
        let found = match config.kind {
            ConfigKind::ConfigMap => read_one::<ConfigMap>(ctx, config)
                .await?
                .and_then(|cm| Some((configmap_facts(&cm, keys)?.1.hash, configmap_views(&cm, &wanted)))),
            ConfigKind::Secret => read_one::<Secret>(ctx, config)
                .await?
                .and_then(|s| Some((secret_facts(&s, keys)?.1.hash, secret_views(&s, &wanted)))),
            ConfigKind::SecretProviderClass => None,
        };
        if let Some((content, views)) = found {
            ctx.index().set_views(config, content, views);
        }
    }
    Ok(())
}

/// The resource named by `config`, if it exists, read with a LIST of its name.
async fn read_one<K>(ctx: &Context, config: &ConfigKey) -> Result<Option<K>, kube::Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(ctx.client.clone(), &config.namespace);
    let selector = format!("metadata.name={}", config.name);
    let listed = api.list(&ListParams::default().fields(&selector)).await?;
    Ok(listed.items.into_iter().find(|o| o.meta().name.as_deref() == Some(config.name.as_str())))
}
