//! Which keys of a ConfigMap or Secret changed, for logs, Events, alerts and the webhook (#16: "say which keys
//! changed", names only). The index keeps a fingerprint per key — 4 bytes of its name, 4 of its value — never the
//! value; a change is compared key by key against the previous fingerprints. Fingerprints only ever name keys in
//! reports: reload decisions use the content hashes.
//!
//! Pure: no client, no I/O.

use std::{fmt, hash::Hasher};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

/// One key's fingerprint: (name, value), each a 32-bit digest.
pub type KeyPrint = (u32, u32);

/// The fingerprints the index keeps per resource: a single key's (the common case) inline, more on the heap — a
/// boxed one-element slice costs a 32-byte allocation per resource (0.6 MB at M1's 20,000).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPrints {
    /// Exactly one key.
    One(KeyPrint),
    /// None, or more than one.
    Many(Box<[KeyPrint]>),
}

impl Default for KeyPrints {
    fn default() -> Self {
        Self::Many(Box::default())
    }
}

impl From<&[KeyPrint]> for KeyPrints {
    fn from(prints: &[KeyPrint]) -> Self {
        match prints {
            [one] => Self::One(*one),
            many => Self::Many(many.into()),
        }
    }
}

impl KeyPrints {
    /// The fingerprints, sorted by name digest.
    pub fn as_slice(&self) -> &[KeyPrint] {
        match self {
            Self::One(print) => std::slice::from_ref(print),
            Self::Many(prints) => prints,
        }
    }
}

/// A resource's keys as a watch delivers them: their names (to report) and fingerprints (to keep).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyDigest {
    /// Key names, in the order of `prints`.
    pub names: Vec<String>,
    /// Fingerprints, sorted by name digest.
    pub prints: Box<[KeyPrint]>,
}

/// The keys one change touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangedKeys {
    /// Keys whose value changed or that are new, sorted.
    pub names: Vec<String>,
    /// How many keys were removed (their names are not kept).
    pub removed: usize,
}

impl ChangedKeys {
    /// Nothing changed (as far as the fingerprints tell).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.removed == 0
    }

    /// The union of several changes (names sorted and unique; removals summed).
    pub fn merge<'a>(changes: impl IntoIterator<Item = &'a ChangedKeys>) -> Self {
        let mut out = Self::default();
        for c in changes {
            out.names.extend(c.names.iter().cloned());
            out.removed += c.removed;
        }
        out.names.sort();
        out.names.dedup();
        out
    }
}

impl fmt::Display for ChangedKeys {
    /// `a, b` / `a, b and 1 removed` / `2 removed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names.join(", "))?;
        match (self.names.is_empty(), self.removed) {
            (_, 0) => Ok(()),
            (true, n) => write!(f, "{n} removed"),
            (false, n) => write!(f, " and {n} removed"),
        }
    }
}

/// A fast 32-bit digest (SipHash with fixed keys, truncated): for telling keys apart in reports only.
fn digest(bytes: &[u8]) -> u32 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(bytes);
    // Truncation on purpose: 32 bits are plenty to tell one key's old and new value apart.
    (h.finish() & u64::from(u32::MAX)) as u32
}

fn key_digest<'a>(entries: impl Iterator<Item = (&'a String, &'a [u8])>) -> KeyDigest {
    let mut pairs: Vec<(KeyPrint, String)> =
        entries.map(|(k, v)| ((digest(k.as_bytes()), digest(v)), k.clone())).collect();
    pairs.sort_unstable_by_key(|(print, _)| print.0);
    let (prints, names): (Vec<KeyPrint>, Vec<String>) = pairs.into_iter().unzip();
    KeyDigest { names, prints: prints.into_boxed_slice() }
}

/// The keys of a ConfigMap (`data` and `binaryData`).
pub fn configmap_digest(cm: &ConfigMap) -> KeyDigest {
    let text = cm.data.iter().flatten().map(|(k, v)| (k, v.as_bytes()));
    let binary = cm.binary_data.iter().flatten().map(|(k, v)| (k, v.0.as_slice()));
    key_digest(text.chain(binary))
}

/// The keys of a Secret (`data`).
pub fn secret_digest(secret: &Secret) -> KeyDigest {
    key_digest(secret.data.iter().flatten().map(|(k, v)| (k, v.0.as_slice())))
}

/// Which keys differ between the fingerprints kept (`old`) and a new content. Pure.
pub fn diff(old: &[KeyPrint], new: &KeyDigest) -> ChangedKeys {
    let find = |name: u32| old.binary_search_by_key(&name, |p| p.0).ok().map(|i| old[i].1);
    let mut names: Vec<String> = new
        .prints
        .iter()
        .zip(&new.names)
        .filter(|((name, value), _)| find(*name) != Some(*value))
        .map(|(_, n)| n.clone())
        .collect();
    names.sort();
    let removed = old.iter().filter(|(name, _)| new.prints.binary_search_by_key(name, |p| p.0).is_err()).count();
    ChangedKeys { names, removed }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn cm(pairs: &[(&str, &str)]) -> ConfigMap {
        let data: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        ConfigMap { data: Some(data), ..ConfigMap::default() }
    }

    #[test]
    fn names_changed_and_added_keys_and_counts_removed_ones() {
        let old = configmap_digest(&cm(&[("a", "1"), ("b", "1"), ("c", "1")]));
        let new = configmap_digest(&cm(&[("a", "1"), ("b", "2"), ("d", "1")]));
        let change = diff(&old.prints, &new);
        assert_eq!(change, ChangedKeys { names: vec!["b".into(), "d".into()], removed: 1 });
        assert_eq!(change.to_string(), "b, d and 1 removed");
        assert!(diff(&old.prints, &old).is_empty());
        let gone = diff(&old.prints, &configmap_digest(&cm(&[])));
        assert_eq!(gone.to_string(), "3 removed");
    }

    #[test]
    fn kept_prints_are_the_digests_and_one_key_needs_no_allocation() {
        for pairs in [&[][..], &[("a", "1")], &[("a", "1"), ("b", "2"), ("c", "3")]] {
            let digest = configmap_digest(&cm(pairs));
            let kept = KeyPrints::from(&digest.prints[..]);
            assert_eq!(kept.as_slice(), &digest.prints[..]);
            assert_eq!(matches!(kept, KeyPrints::One(_)), pairs.len() == 1);
        }
        // The one-key form lives where the pointer of the boxed form would: no larger than a boxed slice.
        assert_eq!(std::mem::size_of::<KeyPrints>(), std::mem::size_of::<Box<[KeyPrint]>>());
    }

    #[test]
    fn merged_changes_are_sorted_and_unique() {
        let a = ChangedKeys { names: vec!["b".into()], removed: 0 };
        let b = ChangedKeys { names: vec!["a".into(), "b".into()], removed: 1 };
        assert_eq!(ChangedKeys::merge([&a, &b]), ChangedKeys { names: vec!["a".into(), "b".into()], removed: 1 });
    }
}
