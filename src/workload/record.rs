//! A workload's `applied-hashes` record as the index keeps it between events: its pairs sorted in one boxed
//! slice. A `BTreeMap` allocates a node for eleven entries even for the one or two a workload usually records
//! (≈ 600 bytes each: 0.6 MB of M1's heap for 1,000 workloads, heaptrack, bench/results/HISTORY.md); plans still build
//! records as maps and compare them with this one in order.

use std::collections::BTreeMap;

use crate::rules::{hash::ContentHash, resource::ConfigKind};

type Pair = (ConfigKind, String);

/// Iterator over a record's pairs.
pub type Iter<'a> = std::iter::Map<std::slice::Iter<'a, (Pair, ContentHash)>, PairRef<'a>>;
type PairRef<'a> = fn(&'a (Pair, ContentHash)) -> (&'a Pair, &'a ContentHash);

/// Sorted (resource, hash) pairs, each resource once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HashRecord(Box<[(Pair, ContentHash)]>);

impl HashRecord {
    /// The hash recorded for `pair`.
    pub fn get(&self, pair: &Pair) -> Option<&ContentHash> {
        self.0.binary_search_by(|(p, _)| p.cmp(pair)).ok().map(|i| &self.0[i].1)
    }

    /// Whether a hash is recorded for `pair`.
    pub fn contains_key(&self, pair: &Pair) -> bool {
        self.get(pair).is_some()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs, sorted by resource.
    pub fn iter(&self) -> Iter<'_> {
        self.0.iter().map(|(pair, hash)| (pair, hash))
    }

    /// Whether `map` records exactly the same.
    pub fn same_as(&self, map: &BTreeMap<Pair, ContentHash>) -> bool {
        self.iter().eq(map.iter())
    }
}

impl From<&BTreeMap<Pair, ContentHash>> for HashRecord {
    fn from(map: &BTreeMap<Pair, ContentHash>) -> Self {
        Self(map.iter().map(|(pair, hash)| (pair.clone(), *hash)).collect())
    }
}

impl From<BTreeMap<Pair, ContentHash>> for HashRecord {
    fn from(map: BTreeMap<Pair, ContentHash>) -> Self {
        Self(map.into_iter().collect())
    }
}

impl FromIterator<(Pair, ContentHash)> for HashRecord {
    /// Sorted, and the last hash of a resource given twice wins (as when collecting a map).
    fn from_iter<I: IntoIterator<Item = (Pair, ContentHash)>>(pairs: I) -> Self {
        pairs.into_iter().collect::<BTreeMap<_, _>>().into()
    }
}

impl<'a> IntoIterator for &'a HashRecord {
    type Item = (&'a Pair, &'a ContentHash);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(kind: ConfigKind, name: &str) -> Pair {
        (kind, name.to_owned())
    }

    #[test]
    fn looks_up_iterates_in_order_and_compares_with_maps() {
        let h = |b: u8| ContentHash::of_entries(vec![vec![b]]);
        let map: BTreeMap<Pair, ContentHash> = [
            (pair(ConfigKind::Secret, "db"), h(1)),
            (pair(ConfigKind::ConfigMap, "z"), h(2)),
            (pair(ConfigKind::ConfigMap, "a"), h(3)),
        ]
        .into_iter()
        .collect();
        let record = HashRecord::from(&map);
        assert_eq!(record.get(&pair(ConfigKind::ConfigMap, "z")), Some(&h(2)));
        assert_eq!(record.get(&pair(ConfigKind::Secret, "db")), Some(&h(1)));
        assert_eq!(record.get(&pair(ConfigKind::Secret, "a")), None);
        assert!(
            record.contains_key(&pair(ConfigKind::ConfigMap, "a"))
                && !record.contains_key(&pair(ConfigKind::Secret, "z"))
        );
        assert!(record.same_as(&map));
        assert!(record.iter().map(|(p, _)| p).eq(map.keys()), "sorted as the map");
        let mut changed = map.clone();
        changed.insert(pair(ConfigKind::ConfigMap, "a"), h(4));
        assert!(!record.same_as(&changed));
        changed.remove(&pair(ConfigKind::ConfigMap, "a"));
        assert!(!record.same_as(&changed), "one fewer");
        let twice: HashRecord =
            [(pair(ConfigKind::ConfigMap, "a"), h(1)), (pair(ConfigKind::ConfigMap, "a"), h(5))].into_iter().collect();
        assert_eq!(twice.iter().count(), 1);
        assert_eq!(twice.get(&pair(ConfigKind::ConfigMap, "a")), Some(&h(5)), "the last wins");
        assert!(HashRecord::default().is_empty() && HashRecord::from(BTreeMap::new()).same_as(&BTreeMap::new()));
    }
}
