//! Which keys a change touched, kept briefly so the reload it causes can name them (#16). Per resource: a
//! fingerprint per key (in its [`super::ConfigEntry`]); per recently changed resource: its last few transitions
//! (content before → after, and the key names). A reload names the keys of the transitions from the content
//! the workload ran with to the current one; when those are not known (older than the last few, or the workload
//! was further behind), it names none rather than guess.

use std::{collections::VecDeque, sync::Arc};

use super::{ConfigFacts, ConfigKey, ConfigUpdate, Index};
use crate::rules::{
    hash::ContentHash,
    keyprints::{ChangedKeys, KeyDigest, diff},
};

/// How many resources keep their recent transitions (about 200 bytes each).
const RECENT_RESOURCES: usize = 4096;
/// How many transitions each keeps (changes coalesced into one reload).
const TRANSITIONS: usize = 4;

/// One content change of a resource.
#[derive(Debug)]
pub(super) struct Transition {
    from: ContentHash,
    from_record: ContentHash,
    to: ContentHash,
    keys: Arc<ChangedKeys>,
}

/// The recent transitions of recently changed resources, bounded.
#[derive(Debug, Default)]
pub(super) struct RecentChanges {
    by_config: std::collections::HashMap<ConfigKey, Vec<Transition>>,
    order: VecDeque<ConfigKey>,
}

impl Index {
    /// Keeps `digest`'s fingerprints for `key`, which `upsert_config` just updated (`update`) from `before`; for a
    /// change of content, returns the keys it touched and remembers them for the reload reports.
    pub fn observe_keys(
        &mut self,
        key: &ConfigKey,
        update: ConfigUpdate,
        before: Option<ConfigFacts>,
        digest: &KeyDigest,
    ) -> Option<Arc<ChangedKeys>> {
        let entry = self.configs.get_mut(key)?;
        let old = std::mem::replace(&mut entry.prints, (&digest.prints[..]).into());
        let (ConfigUpdate::Changed { .. }, Some(before)) = (update, before) else { return None };
        let keys = Arc::new(diff(old.as_slice(), digest));
        let to = entry.facts.hash;
        let recent = &mut self.recent;
        let transitions = recent.by_config.entry(key.clone()).or_insert_with(|| {
            recent.order.push_back(key.clone());
            Vec::new()
        });
        transitions.push(Transition { from: before.hash, from_record: before.record_hash, to, keys: keys.clone() });
        if transitions.len() > TRANSITIONS {
            transitions.remove(0);
        }
        while recent.order.len() > RECENT_RESOURCES {
            if let Some(oldest) = recent.order.pop_front() {
                recent.by_config.remove(&oldest);
            }
        }
        Some(keys)
    }

    /// The keys changed between the content a workload ran with (`ran_with(plain, record form)` tells whether a
    /// content was it) and `config`'s current content, when the transitions between them are known.
    pub(super) fn changed_keys(
        &self,
        config: &ConfigKey,
        current: ContentHash,
        ran_with: impl Fn(ContentHash, ContentHash) -> bool,
    ) -> Option<Arc<ChangedKeys>> {
        let transitions = self.recent.by_config.get(config)?;
        if transitions.last()?.to != current {
            return None;
        }
        let first = transitions.iter().rposition(|t| ran_with(t.from, t.from_record))?;
        match &transitions[first..] {
            [one] => Some(one.keys.clone()),
            several => Some(Arc::new(ChangedKeys::merge(several.iter().map(|t| &*t.keys)))),
        }
    }

    /// Forgets the transitions of a resource gone for good (a kustomize name replaced, a preview namespace
    /// deleted): nothing will be reloaded for them, and they would keep its namespace's name alive.
    pub(super) fn forget_changes(&mut self, config: &ConfigKey) {
        if self.recent.by_config.remove(config).is_some() {
            self.recent.order.retain(|k| k != config);
        }
    }

    /// How many resources keep recent transitions.
    pub(super) fn recent_changes(&self) -> usize {
        self.recent.by_config.len()
    }

    /// The keys touched by `config`'s last change, if it led to `current`.
    pub(super) fn last_changed_keys(&self, config: &ConfigKey, current: ContentHash) -> Option<Arc<ChangedKeys>> {
        let last = self.recent.by_config.get(config)?.last()?;
        (last.to == current).then(|| last.keys.clone())
    }
}
