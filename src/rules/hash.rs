//! Content hashes, byte-identical to upstream Reloader (reloader-behaviour.md §3.1) so a controller taking
//! over from upstream finds the same `STAKATER_*` values and restarts nothing.
//!
//! Every hash is SHA-1 over `k=v` entries sorted byte-wise and joined with `;`, in lower-case hex.
//!
//! Pure: no client, no I/O.

use std::{collections::BTreeMap, fmt};

use base64::Engine as _;
use k8s_openapi::ByteString;
use sha1::{Digest as _, Sha1};

/// A SHA-1 content hash, kept as 20 bytes in the index and rendered as 40 lower-case hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 20]);

impl ContentHash {
    /// A value no content hashes to in practice: "nothing applied yet", so the next plan reloads.
    pub const NONE: Self = Self([0; 20]);

    /// Hash of entries already in `k=v` form: sorted byte-wise, joined with `;`, SHA-1.
    pub fn of_entries(mut entries: Vec<Vec<u8>>) -> Self {
        entries.sort_unstable();
        let mut hasher = Sha1::new();
        for (i, e) in entries.iter().enumerate() {
            if i > 0 {
                hasher.update(b";");
            }
            hasher.update(e);
        }
        Self(hasher.finalize().into())
    }

    /// Parses 40 hex characters (either case), e.g. a `STAKATER_*` env var value.
    pub fn parse_hex(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 40 {
            return None;
        }
        let mut out = [0u8; 20];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            out[i] = u8::try_from(hi * 16 + lo).ok()?;
        }
        Some(Self(out))
    }

    /// HMAC-SHA1 of this hash under `key`. Upstream's unkeyed SHA-1 of a low-entropy Secret (a PIN, a
    /// dictionary password) can be recovered offline by anyone who reads it; a digest under a key such a reader
    /// does not have proves "this content" to the controller and reveals nothing testable without the key.
    pub fn sealed(self, key: &[u8]) -> Self {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
        let mut out = [0u8; 20];
        out.copy_from_slice(ring::hmac::sign(&key, &self.0).as_ref());
        Self(out)
    }

    /// Upstream v1's delete marker: `sha1("__RELOADER_EMPTY_DELETE_MARKER__")`, written by the annotations
    /// strategy when a resource is deleted.
    pub fn delete_marker() -> Self {
        Self(Sha1::digest(b"__RELOADER_EMPTY_DELETE_MARKER__").into())
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn entry(key: &str, value: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(key.len() + 1 + value.len());
    e.extend_from_slice(key.as_bytes());
    e.push(b'=');
    e.extend_from_slice(value);
    e
}

/// ConfigMap: `k=v` for `data`, `k=base64(v)` for `binaryData` (upstream `GetSHAfromConfigmap`).
pub fn configmap(
    data: Option<&BTreeMap<String, String>>,
    binary: Option<&BTreeMap<String, ByteString>>,
) -> ContentHash {
    configmap_keys(data, binary, None)
}

/// [`configmap`] over the keys in `keys` only (sorted; `None`: every key). Key-level reloads (#16): equal to
/// the whole hash when `keys` names every key the ConfigMap has.
pub fn configmap_keys(
    data: Option<&BTreeMap<String, String>>,
    binary: Option<&BTreeMap<String, ByteString>>,
    keys: Option<&[String]>,
) -> ContentHash {
    let wanted = |k: &String| keys.is_none_or(|keys| keys.binary_search(k).is_ok());
    let mut entries = Vec::new();
    for (k, v) in data.into_iter().flatten().filter(|(k, _)| wanted(k)) {
        entries.push(entry(k, v.as_bytes()));
    }
    for (k, v) in binary.into_iter().flatten().filter(|(k, _)| wanted(k)) {
        entries.push(entry(k, base64::engine::general_purpose::STANDARD.encode(&v.0).as_bytes()));
    }
    ContentHash::of_entries(entries)
}

/// Secret: `k=<raw decoded bytes>` for `data` (not base64; `stringData` is never hashed, upstream
/// `GetSHAfromSecret`).
pub fn secret(data: Option<&BTreeMap<String, ByteString>>) -> ContentHash {
    secret_keys(data, None)
}

/// [`secret`] over the keys in `keys` only (sorted; `None`: every key).
pub fn secret_keys(data: Option<&BTreeMap<String, ByteString>>, keys: Option<&[String]>) -> ContentHash {
    let wanted = |k: &String| keys.is_none_or(|keys| keys.binary_search(k).is_ok());
    ContentHash::of_entries(
        data.into_iter().flatten().filter(|(k, _)| wanted(k)).map(|(k, v)| entry(k, &v.0)).collect(),
    )
}

/// SecretProviderClassPodStatus: `id=version` per mounted object plus `SecretProviderClassName=<name>`
/// (upstream `GetSHAfromSecretProviderClassPodStatus`).
pub fn secret_provider_class<'a>(
    class_name: &str,
    objects: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> ContentHash {
    let mut entries: Vec<Vec<u8>> = objects.into_iter().map(|(id, version)| entry(id, version.as_bytes())).collect();
    entries.push(entry("SecretProviderClassName", class_name.as_bytes()));
    ContentHash::of_entries(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn bytes(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec()))).collect()
    }

    // Golden vectors: reloader-behaviour.md §3.1.
    #[test]
    fn empty_data_hashes_the_empty_string() {
        assert_eq!(configmap(None, None).to_string(), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(secret(None).to_string(), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn configmap_single_key_matches_upstream() {
        assert_eq!(
            configmap(Some(&map(&[("key", "value")])), None).to_string(),
            "dc30e0faa89a70dec1033016a2309bbeb9efcbd0"
        );
    }

    #[test]
    fn configmap_two_keys_matches_upstream() {
        assert_eq!(
            configmap(Some(&map(&[("b", "2"), ("a", "1")])), None).to_string(),
            "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"
        );
    }

    #[test]
    fn configmap_binary_data_is_base64_encoded_before_hashing() {
        let h = configmap(Some(&map(&[("test", "test")])), Some(&bytes(&[("bin", "test")])));
        assert_eq!(h.to_string(), "9fba5d05c160e83fa2b0a004566a1bb62f5bd24e");
    }

    #[test]
    fn secret_hashes_raw_bytes_like_a_configmap_with_the_same_text() {
        assert_eq!(secret(Some(&bytes(&[("key", "value")]))).to_string(), "dc30e0faa89a70dec1033016a2309bbeb9efcbd0");
        assert_eq!(
            secret(Some(&bytes(&[("a", "1"), ("b", "2")]))).to_string(),
            "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"
        );
    }

    #[test]
    fn delete_marker_matches_upstream() {
        assert_eq!(ContentHash::delete_marker().to_string(), "aae45badef99284e4dae01d6046154ea9d99532f");
    }

    #[test]
    fn spc_hash_includes_class_name_and_sorts_entries() {
        let a = secret_provider_class("spc", [("b", "2"), ("a", "1")]);
        let expected =
            ContentHash::of_entries(vec![b"SecretProviderClassName=spc".to_vec(), b"a=1".to_vec(), b"b=2".to_vec()]);
        assert_eq!(a, expected);
        assert_ne!(a, secret_provider_class("other", [("a", "1"), ("b", "2")]));
    }

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        let h = configmap(Some(&map(&[("key", "value")])), None);
        assert_eq!(ContentHash::parse_hex(&h.to_string()), Some(h));
        assert_eq!(ContentHash::parse_hex("DC30E0FAA89A70DEC1033016A2309BBEB9EFCBD0"), Some(h));
        assert_eq!(ContentHash::parse_hex("xyz"), None);
        assert_eq!(ContentHash::parse_hex("zc30e0faa89a70dec1033016a2309bbeb9efcbd0"), None);
    }

    #[test]
    fn sealed_is_hmac_sha1_of_the_hash_bytes_under_the_key() {
        // Expected value from Python's hmac module: hmac.new(key, bytes.fromhex(sha1), hashlib.sha1).
        let h = secret(Some(&bytes(&[("password", "123456")])));
        assert_eq!(h.to_string(), "58faa554ae93a71cb676dd1319642b568daf81cf");
        assert_eq!(h.sealed(b"3f1c0e7a-uid").to_string(), "76135fb05918feb4d6c62eeb13db55971969d314");
        assert_ne!(h.sealed(b"another-uid"), h.sealed(b"3f1c0e7a-uid"));
    }
}
