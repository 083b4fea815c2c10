//! Key-level reloads (#16, opt-in): a workload that reads some keys of a ConfigMap or Secret
//! (`env[].valueFrom`, volume and projected `items`) rolls only when one of those keys changes. The index then
//! compares a *view* — the hash of the consumed keys only — instead of the whole content's hash, and that view is
//! what the workload records.
//!
//! Memory stays proportional to what is consumed: a view (one 20-byte hash, plus its record form) is kept only for
//! each distinct key set some opted-in workload reads of a resource. The [`KeyRegistry`] says which key sets are
//! wanted; the watch streams compute their views while they hold the resource's data, and a resource first
//! wanted after it arrived is read once ([`crate::controller`]'s reconcile, one GET).

use std::{collections::HashMap, sync::RwLock};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::ConfigKey;
use crate::{
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

    /// How many resources have wanted key sets (a gauge for memory sizing).
    pub fn len(&self) -> usize {
        self.wanted.read().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// True when no key set is wanted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
