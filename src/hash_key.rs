//! `--hash-key-secret`: the key under which Secret hashes written on workloads (`STAKATER_*_SECRET` values and
//! `last-reloaded-from` hashes) become HMAC-SHA1 digests instead of upstream's plain SHA-1. A plain SHA-1 of a
//! low-entropy Secret can be brute-forced offline by anyone who can read the workload; the keyed digest cannot
//! without the key. Same length and shape (40 hex) as upstream's values.

use std::{fmt, sync::Arc};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

/// The data key of the key Secret that holds the key bytes.
pub const KEY_FIELD: &str = "key";

/// The data key of an optional former key: values written under it still count as current (a rotation moves
/// `key` here and sets a new `key`, so workloads without a restart-safety record do not roll either).
pub const PREVIOUS_KEY_FIELD: &str = "previous";

/// Shortest key accepted, in bytes: 128 bits, so that guessing the key is no easier than guessing the content.
pub const MIN_KEY_LEN: usize = 16;

/// Errors loading the key. None of them carries key bytes.
#[derive(Debug, thiserror::Error)]
pub enum HashKeyError {
    /// The flag is not `<namespace>/<name>`.
    #[error("'hash-key-secret' must be <namespace>/<name>, not '{0}'")]
    InvalidReference(String),
    /// The Secret could not be read.
    #[error("reading the hash key Secret {secret}: {source}")]
    Read {
        /// `<namespace>/<name>`.
        secret: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The Secret has no usable `key` entry.
    #[error("the hash key Secret {secret} needs a data entry '{KEY_FIELD}' of at least {MIN_KEY_LEN} bytes")]
    Unusable {
        /// `<namespace>/<name>`.
        secret: String,
    },
}

/// A loaded key, and the former one if given. Their bytes are never printed (`Debug` is redacted).
#[derive(Clone, PartialEq, Eq)]
pub struct HashKey {
    current: Arc<[u8]>,
    previous: Option<Arc<[u8]>>,
}

impl fmt::Debug for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HashKey(redacted)")
    }
}

impl HashKey {
    /// A key from its bytes; `None` when shorter than [`MIN_KEY_LEN`].
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        (bytes.len() >= MIN_KEY_LEN).then(|| Self { current: bytes.into(), previous: None })
    }

    /// The same key, with a former one whose values still count as current (ignored when too short).
    pub fn with_previous(self, bytes: &[u8]) -> Self {
        Self { previous: (bytes.len() >= MIN_KEY_LEN).then(|| bytes.into()), ..self }
    }

    /// The key bytes values are written under.
    pub fn bytes(&self) -> &[u8] {
        &self.current
    }

    /// The former key's bytes, if any.
    pub fn previous(&self) -> Option<&[u8]> {
        self.previous.as_deref()
    }
}

/// Splits `<namespace>/<name>`.
pub fn parse_reference(text: &str) -> Result<(String, String), HashKeyError> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(HashKeyError::InvalidReference(text.to_owned())),
    }
}

/// Reads the key Secret named by `reference` (one GET; needs `get` on that Secret).
pub async fn load(client: &Client, reference: &str) -> Result<HashKey, HashKeyError> {
    let (namespace, name) = parse_reference(reference)?;
    let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
        .get(&name)
        .await
        .map_err(|source| HashKeyError::Read { secret: reference.to_owned(), source })?;
    let field = |name: &str| secret.data.as_ref().and_then(|d| d.get(name)).map(|b| b.0.as_slice()).unwrap_or_default();
    let key =
        HashKey::from_bytes(field(KEY_FIELD)).ok_or_else(|| HashKeyError::Unusable { secret: reference.to_owned() })?;
    Ok(key.with_previous(field(PREVIOUS_KEY_FIELD)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_need_a_namespace_and_a_name() {
        assert_eq!(parse_reference("reloader/hash-key").ok(), Some(("reloader".into(), "hash-key".into())));
        for bad in ["", "name", "/name", "ns/", "a/b/c"] {
            let e = parse_reference(bad).expect_err(bad).to_string();
            assert!(e.contains("<namespace>/<name>"), "{e}");
        }
    }

    #[test]
    fn short_keys_are_refused_and_keys_never_print() {
        assert!(HashKey::from_bytes(b"short").is_none());
        let key = HashKey::from_bytes(b"0123456789abcdef-secret").expect("key");
        assert_eq!(format!("{key:?}"), "HashKey(redacted)");
        assert_eq!(key.clone().with_previous(b"short").previous(), None, "a short former key is ignored");
        let rotated = key.with_previous(b"fedcba9876543210-former");
        assert_eq!(rotated.previous(), Some(b"fedcba9876543210-former".as_slice()));
        assert_eq!(format!("{rotated:?}"), "HashKey(redacted)");
    }
}
