//! The resource table: every watched ConfigMap, Secret and SecretProviderClass, by key — the index's biggest
//! structure (tens of thousands of entries). Entries sit densely in a `Vec` and the hash table holds only their
//! positions (8 bytes a slot). A `HashMap<ConfigKey, ConfigEntry>` keeps a slot of key and entry for each unit of
//! its capacity — up to twice the entries — and writes them all over its memory, so every page of it is resident;
//! here the spare capacity is the `Vec`'s tail, never touched. At M1 (20,000 resources) that is ≈ 2.5 MB resident
//! instead of 3.7 MB (issue 15, bench/results/HISTORY.md). `hashbrown` is already built for kube-runtime.
//!
//! The positions are also kept per namespace: a workload with a named list (`configmap.reloader.stakater.com/
//! reload: "app-.*"`) is matched against its namespace's resources only, not every resource in the cluster
//! (issue 27, finding 7: each plan and status event of such a workload scanned all 20,000 at M1).

use std::{
    collections::{HashMap, HashSet},
    hash::{BuildHasher, RandomState},
    sync::Arc,
};

use hashbrown::HashTable;

use super::{ConfigEntry, ConfigKey};

/// Resources by key; iteration order is unspecified (as `HashMap`'s).
#[derive(Default)]
pub(super) struct ConfigTable {
    entries: Vec<(ConfigKey, ConfigEntry)>,
    /// Positions in `entries`.
    slots: HashTable<usize>,
    hasher: RandomState,
    /// Positions in `entries`, by namespace; a namespace without resources has no entry.
    by_namespace: HashMap<Arc<str>, HashSet<usize>>,
}

impl ConfigTable {
    fn position(&self, key: &ConfigKey) -> Option<usize> {
        let hash = self.hasher.hash_one(key);
        self.slots.find(hash, |&i| self.entries[i].0 == *key).copied()
    }

    /// The entry of `key`.
    pub fn get(&self, key: &ConfigKey) -> Option<&ConfigEntry> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    /// The entry of `key`, to change.
    pub fn get_mut(&mut self, key: &ConfigKey) -> Option<&mut ConfigEntry> {
        self.position(key).map(|i| &mut self.entries[i].1)
    }

    /// Adds or replaces the entry of `key`; returns the one it replaced.
    pub fn insert(&mut self, key: ConfigKey, entry: ConfigEntry) -> Option<ConfigEntry> {
        if let Some(i) = self.position(&key) {
            return Some(std::mem::replace(&mut self.entries[i].1, entry));
        }
        let position = self.entries.len();
        let hash = self.hasher.hash_one(&key);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.slots.insert_unique(hash, position, |&i| hasher.hash_one(&entries[i].0));
        self.by_namespace.entry(key.namespace.clone()).or_default().insert(position);
        self.entries.push((key, entry));
        None
    }

    /// Removes the entry of `key`: the last entry moves into its place.
    pub fn remove(&mut self, key: &ConfigKey) -> Option<ConfigEntry> {
        let hash = self.hasher.hash_one(key);
        let entries = &self.entries;
        let slot = self.slots.find_entry(hash, |&i| entries[i].0 == *key).ok()?;
        let (position, _) = slot.remove();
        let last = self.entries.len() - 1;
        if let Some(in_namespace) = self.by_namespace.get_mut(&key.namespace) {
            in_namespace.remove(&position);
            if in_namespace.is_empty() {
                self.by_namespace.remove(&key.namespace);
            }
        }
        if position != last {
            let moved = &self.entries[last].0;
            if let Some(p) = self.slots.find_mut(self.hasher.hash_one(moved), |&i| i == last) {
                *p = position;
            }
            if let Some(in_namespace) = self.by_namespace.get_mut(&moved.namespace) {
                in_namespace.remove(&last);
                in_namespace.insert(position);
            }
        }
        Some(self.entries.swap_remove(position).1)
    }

    /// The keys of `namespace`'s resources.
    pub fn keys_in(&self, namespace: &str) -> impl Iterator<Item = &ConfigKey> {
        let positions = self.by_namespace.get(namespace).into_iter().flatten();
        positions.filter_map(|&i| self.entries.get(i).map(|(k, _)| k))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every key.
    pub fn keys(&self) -> impl Iterator<Item = &ConfigKey> {
        self.entries.iter().map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::ConfigFacts;
    use crate::rules::{hash::ContentHash, resource::ConfigKind};

    fn key(name: &str) -> ConfigKey {
        ConfigKey { kind: ConfigKind::ConfigMap, namespace: "ns".into(), name: name.to_owned() }
    }

    fn content(byte: u8) -> ContentHash {
        ContentHash::of_entries(vec![vec![byte]])
    }

    fn entry(byte: u8) -> ConfigEntry {
        ConfigEntry { facts: ConfigFacts::live(content(byte), false, false), prints: Default::default() }
    }

    fn hash_of(table: &ConfigTable, name: &str) -> Option<ContentHash> {
        table.get(&key(name)).map(|e| e.facts.hash)
    }

    /// Inserting, replacing and removing in any order keeps every other entry findable — also the entry that
    /// moves into a removed one's place.
    #[test]
    fn removal_moves_the_last_entry_and_keeps_it_findable() {
        let mut table = ConfigTable::default();
        for i in 0..100u8 {
            assert!(table.insert(key(&format!("cm-{i}")), entry(i)).is_none());
        }
        let replaced = table.insert(key("cm-7"), entry(200)).map(|e| e.facts.hash);
        assert_eq!(replaced, Some(content(7)));
        assert_eq!(table.len(), 100);
        // Remove from the front (the last entry moves each time), the middle, and the very last.
        for i in [0u8, 1, 50, 99, 98] {
            assert_eq!(table.remove(&key(&format!("cm-{i}"))).map(|e| e.facts.hash), Some(content(i)));
            assert!(table.get(&key(&format!("cm-{i}"))).is_none());
        }
        assert!(table.remove(&key("cm-0")).is_none());
        assert_eq!(table.len(), 95);
        for i in (2..98u8).filter(|i| *i != 50) {
            let expected = if i == 7 { 200 } else { i };
            assert_eq!(hash_of(&table, &format!("cm-{i}")), Some(content(expected)), "cm-{i}");
        }
        if let Some(e) = table.get_mut(&key("cm-97")) {
            e.facts.ignored = true;
        }
        assert!(table.get(&key("cm-97")).is_some_and(|e| e.facts.ignored));
        let mut names: Vec<&str> = table.keys().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names.len(), 95);
        assert_eq!(names.first(), Some(&"cm-10"));
        let mut in_ns: Vec<&str> = table.keys_in("ns").map(|k| k.name.as_str()).collect();
        in_ns.sort_unstable();
        assert_eq!(in_ns, names, "the namespace's positions follow every move");
    }

    #[test]
    fn keys_by_namespace_follow_inserts_and_removals_across_namespaces() {
        let mut table = ConfigTable::default();
        let in_ns =
            |ns: &str, name: &str| ConfigKey { kind: ConfigKind::Secret, namespace: ns.into(), name: name.into() };
        for (ns, name) in [("a", "x"), ("b", "y"), ("a", "z"), ("c", "w")] {
            table.insert(in_ns(ns, name), entry(1));
        }
        // Removing "x" moves "w" (namespace c) into its place.
        table.remove(&in_ns("a", "x"));
        let names = |t: &ConfigTable, ns: &str| {
            let mut v: Vec<String> = t.keys_in(ns).map(|k| k.name.clone()).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(
            (names(&table, "a"), names(&table, "b"), names(&table, "c")),
            (vec!["z".into()], vec!["y".into()], vec!["w".into()])
        );
        table.remove(&in_ns("a", "z"));
        assert!(names(&table, "a").is_empty());
        assert!(!table.by_namespace.contains_key("a"), "an emptied namespace leaves no entry");
    }
}
