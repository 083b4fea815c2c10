//! `--from-file` / `--from-literal` for the reverse `explain`: a proposed new content of a ConfigMap or Secret,
//! read with kubectl's own flag shapes (`kubectl create configmap … --from-file=[key=]source`,
//! `--from-literal=key=value`), and which keys it changes. Only key names leave this module: values are compared
//! here and dropped.

use std::{collections::BTreeMap, fmt, path::Path};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Serialize;

/// A content: key → bytes (a ConfigMap's `data` and `binaryData`, a Secret's decoded `data`).
pub type Content = BTreeMap<String, Vec<u8>>;

/// Why the proposed content could not be read (kubectl's messages where kubectl has one).
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// `--from-literal` without `=`.
    #[error("invalid literal source {0:?}, expected key=value")]
    Literal(String),
    /// A key kubectl would refuse.
    #[error(
        "{0:?} is not a valid key name for a ConfigMap or Secret: a valid key consists of alphanumeric characters, '-', '_' or '.'"
    )]
    Key(String),
    /// The same key twice.
    #[error("cannot add key {0:?}, another key by that name already exists")]
    Duplicate(String),
    /// `--from-file=key=dir/`.
    #[error("cannot give a key name for a directory path: {0:?}")]
    KeyForDirectory(String),
    /// A file or directory that cannot be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Key names that differ between two contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ContentChange {
    /// Keys in both whose values differ.
    pub changed: Vec<String>,
    /// Keys only in the new content.
    pub added: Vec<String>,
    /// Keys only in the current content.
    pub removed: Vec<String>,
}

impl ContentChange {
    /// Every key that differs, changed, added or removed.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.changed.iter().chain(&self.added).chain(&self.removed)
    }

    /// No key differs: the controller sees no change.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

impl fmt::Display for ContentChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no key changes");
        }
        let parts = [("changed", &self.changed), ("added", &self.added), ("removed", &self.removed)];
        let parts: Vec<String> = parts
            .iter()
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(what, keys)| format!("{what} {}", keys.join(", ")))
            .collect();
        f.write_str(&parts.join("; "))
    }
}

/// Which keys `new` changes relative to `current`. Pure.
pub fn diff(current: &Content, new: &Content) -> ContentChange {
    let mut change = ContentChange::default();
    for (key, value) in new {
        match current.get(key) {
            Some(old) if old == value => {}
            Some(_) => change.changed.push(key.clone()),
            None => change.added.push(key.clone()),
        }
    }
    change.removed = current.keys().filter(|k| !new.contains_key(*k)).cloned().collect();
    change
}

/// A ConfigMap's content: `data` and `binaryData` together (kubectl puts a file in one or the other).
pub fn configmap_content(cm: &ConfigMap) -> Content {
    let text = cm.data.iter().flatten().map(|(k, v)| (k.clone(), v.clone().into_bytes()));
    let binary = cm.binary_data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone()));
    text.chain(binary).collect()
}

/// A Secret's content (`data`, decoded).
pub fn secret_content(secret: &Secret) -> Content {
    secret.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect()
}

/// Reads `--from-literal=key=value` and `--from-file=[key=]source` as kubectl does: a file's key is its base name
/// unless given; a directory contributes each regular file in it (not recursing), under its base name.
pub fn read_sources(literals: &[String], files: &[String]) -> Result<Content, PreviewError> {
    let mut content = Content::new();
    let mut add = |key: String, value: Vec<u8>| {
        valid_key(&key)?;
        if content.insert(key.clone(), value).is_some() {
            return Err(PreviewError::Duplicate(key));
        }
        Ok(())
    };
    for literal in literals {
        let (key, value) = literal.split_once('=').ok_or_else(|| PreviewError::Literal(literal.clone()))?;
        add(key.to_owned(), value.as_bytes().to_vec())?;
    }
    for source in files {
        let (key, path) = match source.split_once('=') {
            Some((key, path)) => (Some(key), path),
            None => (None, source.as_str()),
        };
        let read_err = |source| PreviewError::Read { path: path.to_owned(), source };
        if Path::new(path).is_dir() {
            if key.is_some() {
                return Err(PreviewError::KeyForDirectory(path.to_owned()));
            }
            let mut entries: Vec<_> =
                std::fs::read_dir(path).map_err(read_err)?.collect::<Result<_, _>>().map_err(read_err)?;
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                if entry.file_type().map_err(read_err)?.is_file() {
                    let value = std::fs::read(entry.path()).map_err(read_err)?;
                    add(entry.file_name().to_string_lossy().into_owned(), value)?;
                }
            }
        } else {
            let value = std::fs::read(path).map_err(read_err)?;
            let base = || Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            add(key.map_or_else(base, str::to_owned), value)?;
        }
    }
    Ok(content)
}

/// Kubernetes' rule for ConfigMap and Secret keys (`IsConfigMapKey`).
fn valid_key(key: &str) -> Result<(), PreviewError> {
    let chars_ok = key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if key.is_empty() || key.len() > 253 || !chars_ok || key == "." || key.starts_with("..") {
        return Err(PreviewError::Key(key.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
#[path = "preview_tests.rs"]
mod tests;
