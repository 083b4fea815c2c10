//! The index's resources: their facts as the watches report them, deletions (tombstones for
//! `--reload-on-delete`, the sealed records of deleted Secrets), and which resource streams have listed.

use super::{Baseline, ConfigEntry, ConfigFacts, ConfigKey, ConfigUpdate, DEPARTED_LIMIT, Index};
use crate::rules::{hash::ContentHash, resource::ConfigKind};

impl Index {
    /// Records whether the resource stream of `kind` in `namespace` (`None`: all) has completed a list.
    pub fn set_config_source_listed(&mut self, kind: ConfigKind, namespace: Option<&str>, listed: bool) {
        let source = (kind, namespace.map(str::to_owned));
        if listed {
            self.unlisted_config_sources.remove(&source);
        } else {
            self.unlisted_config_sources.insert(source);
        }
    }

    /// Whether every resource of `kind` in `namespace` is known (its stream has listed).
    pub(super) fn config_kind_listed(&self, kind: ConfigKind, namespace: &str) -> bool {
        !self.unlisted_config_sources.iter().any(|(k, ns)| *k == kind && ns.as_deref().is_none_or(|n| n == namespace))
    }

    /// The facts of a resource.
    pub fn config(&self, key: &ConfigKey) -> Option<&ConfigFacts> {
        self.configs.get(key).map(|e| &e.facts)
    }

    /// Records a resource. A new resource becomes, per `baseline`, what the workloads that may use it and have
    /// no record of it are assumed to run with.
    pub fn upsert_config(&mut self, key: ConfigKey, mut facts: ConfigFacts, baseline: Baseline) -> ConfigUpdate {
        let hash = facts.hash;
        let update = match self.configs.get_mut(&key) {
            Some(entry) => {
                // The content's write time: an update that keeps the content (annotations, a relist) keeps it.
                let old = &entry.facts;
                if old.hash == facts.hash && !old.deleted && old.written_second != 0 {
                    facts.written_second = old.written_second;
                }
                let update = match old {
                    old if old.hash != facts.hash || old.deleted => ConfigUpdate::Changed { old: old.hash },
                    old if *old != facts => ConfigUpdate::MetadataOnly,
                    _ => ConfigUpdate::Unchanged,
                };
                entry.facts = facts;
                update
            }
            None => {
                self.configs.insert(key.clone(), ConfigEntry { facts, prints: Default::default() });
                ConfigUpdate::Created
            }
        };
        if matches!(update, ConfigUpdate::Changed { .. }) {
            self.views.remove(&key);
        }
        if update == ConfigUpdate::Created {
            for w in self.candidates(&key) {
                if let Some(state) = self.workloads.get_mut(&w) {
                    // As the workload names it: `<namespace>/<name>` from another namespace.
                    state.baselines.insert(super::pair_of(&w.namespace, &key), baseline.hash(hash));
                }
            }
        }
        update
    }

    /// Forgets a resource, or with `tombstone` keeps it as deleted so workloads can react to the deletion
    /// (a tombstone deleted again is forgotten, so relists prune them). Returns whether a live resource was
    /// turned into a tombstone or forgotten.
    pub fn delete_config(&mut self, key: &ConfigKey, tombstone: bool) -> bool {
        self.views.remove(key);
        match self.configs.get_mut(key).map(|e| &mut e.facts) {
            Some(f) if tombstone && !f.deleted => {
                let marker = ContentHash::delete_marker();
                // When it was deleted is not on the object: `evict-pods` takes when the controller saw it.
                let consent = std::mem::take(&mut f.consent);
                *f = ConfigFacts { hash: marker, record_hash: marker, deleted: true, written_second: 0, consent, ..*f };
                true
            }
            Some(f) => {
                let was_live = !f.deleted;
                let (hash, record_hash) = (f.hash, f.record_hash);
                self.configs.remove(key);
                if was_live && record_hash != hash {
                    self.remember_departed(key.clone(), hash, record_hash);
                }
                self.forget_pair(key);
                self.forget_changes(key);
                was_live
            }
            None => false,
        }
    }

    pub(super) fn remember_departed(&mut self, key: ConfigKey, hash: ContentHash, record_hash: ContentHash) {
        if self.departed.insert(key.clone(), (hash, record_hash)).is_none() {
            self.departed_order.push_back(key);
        }
        while self.departed_order.len() > DEPARTED_LIMIT {
            if let Some(old) = self.departed_order.pop_front() {
                self.departed.remove(&old);
            }
        }
    }

    /// The record value sealed for `hash` under an earlier incarnation of `key` (a deleted Secret re-created).
    pub(super) fn departed_record(&self, key: &ConfigKey, hash: ContentHash) -> Option<ContentHash> {
        self.departed.get(key).filter(|(departed, _)| *departed == hash).map(|(_, sealed)| *sealed)
    }

    /// Keys of the resources of `kind` (in `namespace`, if given) — for pruning after a relist.
    pub fn configs_of(&self, kind: ConfigKind, namespace: Option<&str>) -> Vec<ConfigKey> {
        self.configs
            .keys()
            .filter(|k| k.kind == kind && namespace.is_none_or(|ns| *k.namespace == *ns))
            .cloned()
            .collect()
    }
}
