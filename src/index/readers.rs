//! The workloads that reference one resource. Most resources have one reader: it is kept inline, without the
//! B-tree node (≈ 540 bytes for eleven slots) a one-element `BTreeSet` allocates — heaptrack at M1: 1.1 MB for
//! 2,000 such sets. Fan-outs (one ConfigMap shared by thousands of workloads) stay a `BTreeSet`.

use std::collections::BTreeSet;

use crate::workload::WorkloadKey;

/// A set of workload keys, inline while it has one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Readers {
    /// None (only transiently: emptied sets are removed from the index).
    #[default]
    None,
    /// One.
    One(WorkloadKey),
    /// Several.
    Many(BTreeSet<WorkloadKey>),
}

impl Readers {
    /// Adds `key`.
    pub fn insert(&mut self, key: WorkloadKey) {
        match self {
            Self::None => *self = Self::One(key),
            Self::One(one) if *one == key => {}
            Self::One(_) => {
                if let Self::One(one) = std::mem::take(self) {
                    *self = Self::Many(BTreeSet::from([one, key]));
                }
            }
            Self::Many(set) => {
                set.insert(key);
            }
        }
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &WorkloadKey) {
        match self {
            Self::One(one) if one == key => *self = Self::None,
            Self::Many(set) => {
                set.remove(key);
            }
            _ => {}
        }
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::None => true,
            Self::One(_) => false,
            Self::Many(set) => set.is_empty(),
        }
    }

    /// The keys, in order.
    pub fn iter(&self) -> impl Iterator<Item = &WorkloadKey> {
        let (one, many) = match self {
            Self::None => (None, None),
            Self::One(one) => (Some(one), None),
            Self::Many(set) => (None, Some(set)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadKind;

    fn w(name: &str) -> WorkloadKey {
        WorkloadKey { kind: WorkloadKind::Deployment, namespace: "ns".into(), name: name.into() }
    }

    fn names(r: &Readers) -> Vec<&str> {
        r.iter().map(|k| k.name.as_str()).collect()
    }

    #[test]
    fn behaves_as_a_set_inline_or_not() {
        let mut r = Readers::default();
        assert!(r.is_empty());
        r.insert(w("b"));
        r.insert(w("b"));
        assert_eq!(r, Readers::One(w("b")));
        r.insert(w("a"));
        r.insert(w("c"));
        assert_eq!(names(&r), ["a", "b", "c"]);
        r.remove(&w("b"));
        r.remove(&w("missing"));
        assert_eq!(names(&r), ["a", "c"]);
        r.remove(&w("a"));
        r.remove(&w("c"));
        assert!(r.is_empty());
        let mut one = Readers::One(w("x"));
        one.remove(&w("y"));
        assert_eq!(names(&one), ["x"]);
        one.remove(&w("x"));
        assert!(one.is_empty());
    }
}
