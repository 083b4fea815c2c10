//! `explain cloneset/web` without `--workload-kind`: a kind the flags did not configure is looked up in the
//! cluster's API discovery and configured for this process the way the controller's flag would name it — its
//! preset when it is one (`kruise-cloneset`), else `<group>/<version>/<Kind>` with its pod template at
//! `spec.template`. A kind the controller runs with another template path (`=<path>`, `=-`) needs that same flag
//! here too: discovery cannot tell where a custom resource keeps its pod template.

use kube::{
    Client,
    discovery::{ApiCapabilities, ApiResource, Discovery, Scope},
};

use crate::rules::configured_kinds::{self, ConfiguredKind, PRESETS};

/// Configures the namespaced kind `name` names as kubectl would (`cloneset`, `clonesets`,
/// `clonesets.apps.kruise.io`) when discovery finds it in an API group (the core group has no workload kinds).
/// `Ok(false)`: no such kind, or kinds were configured by flags already (the flags' list is the one used).
pub async fn configure_kind_named(client: &Client, name: &str) -> Result<bool, kube::Error> {
    if !configured_kinds::registered().is_empty() {
        return Ok(false);
    }
    let discovery = Discovery::new(client.clone()).exclude(&[""]);
    let discovery = match discovery.run_aggregated().await {
        Ok(found) => found,
        // Aggregated discovery is served from Kubernetes 1.30 (beta from 1.26): older servers are asked per group.
        Err(_) => Discovery::new(client.clone()).exclude(&[""]).run().await?,
    };
    // Each kind at its most stable version: a group's preferred version may not serve every kind (apps.kruise.io
    // prefers v1beta1, which has the Advanced StatefulSet but not the CloneSet).
    let resources = discovery.groups().flat_map(|g| g.resources_by_stability()).collect::<Vec<_>>();
    let Some((resource, _)) = resources.iter().find(|(r, caps)| names(r, caps, name)) else { return Ok(false) };
    let kind = PRESETS
        .into_iter()
        .filter_map(ConfiguredKind::preset)
        .find(|p| p.group == resource.group && p.kind == resource.kind)
        .map_or_else(|| ConfiguredKind::parse(&format!("{}/{}", resource.api_version, resource.kind)), Ok);
    let Ok(kind) = kind else { return Ok(false) };
    if configured_kinds::register(vec![kind], crate::workload::kinds::is_built_in).is_err() {
        return Ok(false);
    }
    configured_kinds::set_plural(0, &resource.plural);
    Ok(true)
}

/// Whether `name` names the namespaced `resource`, by the rule the controller names configured kinds by.
fn names(resource: &ApiResource, caps: &ApiCapabilities, name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    caps.scope == Scope::Namespaced
        && configured_kinds::names_kind(&lower, (&resource.group, &resource.kind, &resource.plural))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloneset() -> (ApiResource, ApiCapabilities) {
        let resource = ApiResource {
            group: "apps.kruise.io".into(),
            version: "v1alpha1".into(),
            api_version: "apps.kruise.io/v1alpha1".into(),
            kind: "CloneSet".into(),
            plural: "clonesets".into(),
        };
        let caps = ApiCapabilities { scope: Scope::Namespaced, subresources: Vec::new(), operations: Vec::new() };
        (resource, caps)
    }

    #[test]
    fn a_kind_is_named_by_kind_plural_or_plural_and_group_as_kubectl_names_it() {
        let (resource, caps) = cloneset();
        for name in ["cloneset", "CloneSet", "clonesets", "clonesets.apps.kruise.io", "cloneset.apps.kruise.io"] {
            assert!(names(&resource, &caps, name), "{name}");
        }
        for name in ["clone", "clonesets.apps", "deployment", "clonesets.example.com"] {
            assert!(!names(&resource, &caps, name), "{name}");
        }
        let cluster_wide = ApiCapabilities { scope: Scope::Cluster, ..caps };
        assert!(!names(&resource, &cluster_wide, "cloneset"), "a cluster-scoped kind is no workload");
    }
}
