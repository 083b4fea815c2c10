//! reloader: rolls out Kubernetes workloads when the ConfigMaps and Secrets they use change — a drop-in
//! replacement for Stakater Reloader.
//!
//! Functional core (no client, no clock): [`annotations`], [`references`], [`hash`], [`decision`],
//! [`strategy`]. Imperative shell: [`index`], [`controller`], [`workload`].

pub mod alerts;
pub mod annotations;
pub mod client;
pub mod config;
pub mod constants;
pub mod controller;
pub mod csi;
pub mod decision;
pub mod duration;
pub mod events;
pub mod hash;
pub mod http;
pub mod index;
pub mod leader;
pub mod metrics;
pub mod pause;
pub mod references;
pub mod resource;
pub mod selector;
pub mod strategy;
pub mod workload;
