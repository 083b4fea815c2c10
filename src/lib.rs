//! reloader: rolls out Kubernetes workloads when the ConfigMaps and Secrets they use change — a drop-in
//! replacement for Stakater Reloader.
//!
//! Functional core (no client, no clock): [`annotations`], [`references`], [`hash`], [`decision`],
//! [`strategy`]. Imperative shell: [`index`], [`controller`], [`workload`].

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
pub mod annotations;
pub mod build_info;
pub mod client;
pub mod config;
pub mod configured_kinds;
pub mod constants;
pub mod controller;
pub mod csi;
pub mod decision;
pub mod duration;
pub mod events;
pub mod explain;
pub mod gates;
pub mod hash;
pub mod hash_key;
pub mod http;
pub mod index;
pub mod keyprints;
pub mod keys;
pub mod leader;
pub mod logging;
pub mod metainfo;
pub mod metrics;
pub mod pause;
pub mod pod_restarts;
pub mod ratelimit;
pub mod record_refusals;
pub mod references;
pub mod resource;
pub mod selector;
pub mod strategy;
pub mod values;
pub mod window;
pub mod workload;

#[cfg(test)]
mod bad_input_tests;
