//! reloader: rolls out Kubernetes workloads when the ConfigMaps and Secrets they use change — a drop-in
//! replacement for Stakater Reloader.
//!
//! Functional core (no client, no I/O, no clock): [`rules`]. Imperative shell: [`index`], [`controller`],
//! [`workload`], [`client`], [`events`], [`alerts`], [`explain`]. The rest of this level is the process:
//! [`config`], [`metrics`], [`http`], [`logging`], [`leader`] and their helpers.

/// Implements `kube::Resource` for a slim namespaced type with a `metadata` field (custom resources we read
/// only a few fields of: Argo Rollouts, DeploymentConfigs, CSI objects).
macro_rules! impl_namespaced_resource {
    ($name:ident, $group:literal, $version:literal, $plural:literal) => {
        impl kube::Resource for $name {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                stringify!($name).into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub mod alerts;
pub mod allocator;
pub mod build_info;
pub mod client;
pub mod config;
pub mod constants;
pub mod controller;
pub mod events;
pub mod explain;
pub mod hash_key;
pub mod http;
pub mod index;
pub mod leader;
pub mod logging;
pub mod metainfo;
pub mod metrics;
pub mod ratelimit;
pub mod rules;
pub mod workload;

#[cfg(test)]
mod bad_input_tests;
