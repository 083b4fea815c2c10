//! Key-level reloads: a resource whose consumed keys' hash the index lacks (a workload opted in, or arrived,
//! after the resource was last seen) is read once, and the views its key-level readers want are computed from it.
//! Its data is dropped here; only the hashes reach the index.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;

use super::{Context, configmap_facts, secret_facts};
use crate::{
    index::{ConfigKey, configmap_views, secret_views},
    resource::ConfigKind,
};

/// Reads each resource and adds the wanted views of it to the index.
pub(super) async fn read_views(ctx: &Context, configs: &[ConfigKey]) -> Result<(), kube::Error> {
    for config in configs {
        let wanted = ctx.stream_context.key_registry.wanted(config);
        if wanted.is_empty() {
            continue;
        }
        let keys = &ctx.settings.keys;
        let found = match config.kind {
            ConfigKind::ConfigMap => Api::<ConfigMap>::namespaced(ctx.client.clone(), &config.namespace)
                .get_opt(&config.name)
                .await?
                .and_then(|cm| Some((configmap_facts(&cm, keys)?.1.hash, configmap_views(&cm, &wanted)))),
            ConfigKind::Secret => Api::<Secret>::namespaced(ctx.client.clone(), &config.namespace)
                .get_opt(&config.name)
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
