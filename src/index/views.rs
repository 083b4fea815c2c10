//! Key-level reloads (#16, opt-in): a workload that reads some keys of a ConfigMap or Secret
//! (`env[].valueFrom`, volume and projected `items`) rolls only when one of those keys changes. The index then
//! compares a *view* — the hash of the consumed keys only — instead of the whole content's hash, and that view is
//! what the workload records.
//!
//! Memory stays proportional to what is consumed: a view (one 20-byte hash, plus its record form) is kept only for
//! each distinct key set some opted-in workload reads of a resource. The [`KeyRegistry`] says which key sets are
//! wanted; the watch streams compute their views while they hold the resource's data, and a resource first
//! wanted after it arrived is read once ([`crate::controller`]'s reconcile, one GET).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::{ConfigKey, Index, WorkloadSummary};
use crate::rules::{
    hash::{self, ContentHash},
    references::KeySet,
};

/// The hash of some keys of a resource's current content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyView {
    /// The keys (sorted).
    pub keys: KeySet,
    /// Upstream's hash function over those keys only.
    pub hash: ContentHash,
    /// Its form in the `applied-hashes` record (sealed under the Secret's UID, as whole-content entries are).
    pub record_hash: ContentHash,
}

/// Which key sets of which resources the index wants views of. Shared by the index (which keeps it current as
/// workloads come, go and opt in or out) and the watch streams (which read it for each resource they see).
#[derive(Debug, Default)]
pub struct KeyRegistry {
    wanted: RwLock<HashMap<ConfigKey, Vec<KeySet>>>,
}

impl KeyRegistry {
    /// The key sets wanted for `key` (none for most resources).
    pub fn wanted(&self, key: &ConfigKey) -> Vec<KeySet> {
        // A poisoned lock only means a panic elsewhere mid-update; the map itself is still a valid map.
        let wanted = self.wanted.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        wanted.get(key).cloned().unwrap_or_default()
    }

    /// Sets the key sets wanted for `key`.
    pub(super) fn set(&self, key: &ConfigKey, sets: Vec<KeySet>) {
        let mut wanted = self.wanted.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if sets.is_empty() {
            wanted.remove(key);
        } else {
            wanted.insert(key.clone(), sets);
        }
    }
}

/// The wanted views of a ConfigMap.
pub fn configmap_views(cm: &ConfigMap, wanted: &[KeySet]) -> Vec<KeyView> {
    let view = |keys: &KeySet| {
        let hash = hash::configmap_keys(cm.data.as_ref(), cm.binary_data.as_ref(), Some(keys));
        KeyView { keys: keys.clone(), hash, record_hash: hash }
    };
    wanted.iter().map(view).collect()
}

/// The wanted views of a Secret (record forms sealed under its UID).
pub fn secret_views(secret: &Secret, wanted: &[KeySet]) -> Vec<KeyView> {
    let uid = secret.metadata.uid.as_deref().unwrap_or_default();
    let view = |keys: &KeySet| {
        let hash = hash::secret_keys(secret.data.as_ref(), Some(keys));
        KeyView { keys: keys.clone(), hash, record_hash: hash.sealed(uid.as_bytes()) }
    };
    wanted.iter().map(view).collect()
}

impl Index {
    /// Key-level reloads: the registry shared with the watch streams, and `--reload-on`'s default.
    pub fn set_key_level(&mut self, registry: Arc<KeyRegistry>, keys_used_default: bool) {
        self.key_registry = registry;
        self.keys_used_default = keys_used_default;
    }

    /// Adds views of `key`'s content (computed from the resource whose whole hash is `content`); ignored when the
    /// index knows another content by now.
    pub fn set_views(&mut self, key: &ConfigKey, content: ContentHash, views: Vec<KeyView>) {
        if views.is_empty() || self.configs.get(key).is_none_or(|e| e.facts.hash != content || e.facts.deleted) {
            return;
        }
        let known = self.views.entry(key.clone()).or_default();
        for view in views {
            known.retain(|v| v.keys != view.keys);
            known.push(view);
        }
    }

    /// The keys of `config` a key-level reader reads (`None`: not key-level, or it reads every key).
    pub fn keys_read(&self, workload: &crate::workload::WorkloadKey, config: &ConfigKey) -> Option<KeySet> {
        let summary = &self.workloads.get(workload)?.summary;
        let used = summary.uses.iter().find(|u| u.kind == config.kind && u.name == config.name)?;
        used.keys.clone().filter(|_| self.key_level(summary))
    }

    /// The workload opted in to key-level reloads (its annotation, else `--reload-on`).
    pub(super) fn key_level(&self, summary: &WorkloadSummary) -> bool {
        summary.annotations.keys_used.unwrap_or(self.keys_used_default)
    }

    /// Tells the watch streams which key sets of `config` to compute views of: those its key-level readers read.
    pub(super) fn refresh_wanted(&self, config: &ConfigKey) {
        let mut sets: Vec<crate::rules::references::KeySet> = Vec::new();
        for w in self.referenced_by.get(config).into_iter().flat_map(|r| r.iter()) {
            let Some(state) = self.workloads.get(w).filter(|s| self.key_level(&s.summary)) else { continue };
            let used = state.summary.uses.iter().find(|u| u.kind == config.kind && u.name == config.name);
            if let Some(keys) = used.and_then(|u| u.keys.as_ref())
                && !sets.contains(keys)
            {
                sets.push(keys.clone());
            }
        }
        self.key_registry.set(config, sets);
    }
}
