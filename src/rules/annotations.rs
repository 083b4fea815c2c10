//! Annotation keys (all overridable by flags, as upstream) and the few annotation values a workload's
//! reload decisions need, extracted once when the workload is indexed so the object can be dropped.
//!
//! Pure: no client, no I/O.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, LazyLock, Mutex, PoisonError, Weak},
};

use regex::Regex;

use crate::constants::annotation as default;
use crate::rules::{
    resource::ConfigKind,
    values::{WorkloadProblem, parse_go_bool},
};

/// The annotation keys in use (defaults in [`crate::constants::annotation`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnotationKeys {
    /// `reloader.stakater.com/auto`.
    pub auto: String,
    /// Typed auto keys, indexed by [`kind_index`].
    pub typed_auto: [String; 3],
    /// Named-list keys, indexed by [`kind_index`].
    pub named: [String; 3],
    /// Exclude-list keys, indexed by [`kind_index`].
    pub exclude: [String; 3],
    /// `reloader.stakater.com/search`.
    pub search: String,
    /// `reloader.stakater.com/match` (on resources).
    pub matches: String,
    /// `reloader.stakater.com/ignore` (on resources).
    pub ignore: String,
    /// `deployment.reloader.stakater.com/pause-period`.
    pub pause_period: String,
    /// `deployment.reloader.stakater.com/paused-at`.
    pub paused_at: String,
    /// `reloader.stakater.com/reload-on` (ours: key-level reloads).
    pub reload_on: String,
}

impl Default for AnnotationKeys {
    fn default() -> Self {
        Self {
            auto: default::AUTO.into(),
            typed_auto: [
                default::CONFIGMAP_AUTO.into(),
                default::SECRET_AUTO.into(),
                default::SECRETPROVIDERCLASS_AUTO.into(),
            ],
            named: [
                default::CONFIGMAP_RELOAD.into(),
                default::SECRET_RELOAD.into(),
                default::SECRETPROVIDERCLASS_RELOAD.into(),
            ],
            exclude: [
                default::CONFIGMAP_EXCLUDE.into(),
                default::SECRET_EXCLUDE.into(),
                default::SECRETPROVIDERCLASS_EXCLUDE.into(),
            ],
            search: default::SEARCH.into(),
            matches: default::MATCH.into(),
            ignore: default::IGNORE.into(),
            pause_period: default::PAUSE_PERIOD.into(),
            paused_at: default::PAUSED_AT.into(),
            reload_on: default::RELOAD_ON.into(),
        }
    }
}

/// Array index of a kind in the per-kind key and value arrays.
pub fn kind_index(kind: ConfigKind) -> usize {
    match kind {
        ConfigKind::ConfigMap => 0,
        ConfigKind::Secret => 1,
        ConfigKind::SecretProviderClass => 2,
    }
}

/// One entry of a named list, matched as the anchored regex `^entry$` (upstream v1).
#[derive(Clone, Debug)]
pub struct NamedPattern {
    /// The entry as written (trimmed).
    pub text: String,
    matcher: Matcher,
}

/// How an entry is matched. Most entries are plain names (`my-config`, or `^my-config$`): compared as strings,
/// which is what the anchored regex does with them. A compiled regex costs ≈ 10 KB once it has matched (its
/// caches; measured with 12,000 of them); at M2N, 6,000 workloads with named lists took RSS after sync from 59
/// to 230 MiB when every entry was compiled.
#[derive(Clone, Debug)]
enum Matcher {
    Exact(String),
    Regex(Arc<Regex>),
}

/// Compiled regex entries, shared by every workload that writes the same entry (one Helm chart in many
/// namespaces), and kept only while a workload holds them. Without it each workload compiled its own, again on
/// every event of the workload (the summary is re-read): M2R (6,000 workloads with regex lists) used 4.9 s of CPU
/// against M2's 2.9.
static COMPILED: LazyLock<Mutex<HashMap<String, Weak<Regex>>>> = LazyLock::new(Mutex::default);

/// The compiled regex of `entry`, shared.
fn compiled(entry: &str) -> Result<Arc<Regex>, regex::Error> {
    let mut cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(regex) = cache.get(entry).and_then(Weak::upgrade) {
        return Ok(regex);
    }
    let regex = Arc::new(Regex::new(&format!("^(?:{entry})$"))?);
    // Entries no workload holds any more go when the map has doubled since the last sweep (amortised O(1)).
    if cache.len() >= 64 && cache.len().is_power_of_two() {
        cache.retain(|_, r| r.strong_count() > 0);
    }
    cache.insert(entry.to_owned(), Arc::downgrade(&regex));
    Ok(regex)
}

impl NamedPattern {
    /// The entry as a matcher; an invalid regex is the error.
    fn new(entry: &str) -> Result<Self, regex::Error> {
        let unanchored = entry.strip_prefix('^').and_then(|e| e.strip_suffix('$')).unwrap_or(entry);
        let literal = |e: &str| !e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let matcher = match [entry, unanchored].into_iter().find(|e| literal(e)) {
            Some(name) => Matcher::Exact(name.to_owned()),
            None => Matcher::Regex(compiled(entry)?),
        };
        Ok(Self { text: entry.to_owned(), matcher })
    }

    /// The one name it matches, when it is a plain name (no regex).
    pub fn exact(&self) -> Option<&str> {
        match &self.matcher {
            Matcher::Exact(exact) => Some(exact),
            Matcher::Regex(_) => None,
        }
    }

    /// True when the whole `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match &self.matcher {
            Matcher::Exact(exact) => exact == name,
            Matcher::Regex(regex) => regex.is_match(name),
        }
    }
}

/// A `<namespace>/<name>` entry of a named list: one resource of that namespace, by its exact name. Never a
/// regex (issue 38): matched against another namespace's names, a regex would tell a tenant which exist there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteEntry {
    /// The namespace.
    pub namespace: String,
    /// The resource's name.
    pub name: String,
}

impl RemoteEntry {
    /// True when it names the resource `name` of `namespace`.
    pub fn names(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.name == name
    }
}

impl std::fmt::Display for RemoteEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl PartialEq for NamedPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Selection {
    /// Its named list has no regex entry (or is empty).
    pub fn pattern_free(&self) -> bool {
        self.named.iter().all(|p| p.exact().is_some())
    }
}

/// Annotation values that select a workload for one resource kind, read from the workload metadata, or from
/// the pod template when the metadata has none of the four keys (upstream v1 `ShouldReload` step 3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// Generic auto value (`None` when absent).
    pub auto: Option<String>,
    /// Typed auto value for this kind.
    pub typed_auto: Option<String>,
    /// Search value.
    pub search: Option<String>,
    /// Compiled named-list entries (invalid ones are left out and reported in [`WorkloadAnnotations::problems`]).
    pub named: Vec<NamedPattern>,
    /// Named-list entries `<namespace>/<name>` (ours, issue 29): a resource in another namespace, named exactly.
    /// Acted on only with `--allow-cross-namespace-references` and the resource's consent ([`crate::rules::decision`]).
    pub remote: Vec<RemoteEntry>,
    /// Exclude-list entries; always from workload metadata (upstream v1).
    pub exclude: Vec<String>,
}

/// Everything about a workload's annotations that decisions need.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadAnnotations {
    /// Per kind, indexed by [`kind_index`].
    pub selection: [Selection; 3],
    /// `reload-on`: `Some(true)` for `keys-used`, `Some(false)` for `any-key`, `None` when absent (or invalid):
    /// `--reload-on` decides.
    pub keys_used: Option<bool>,
    /// Problems found while reading the values.
    pub problems: Vec<WorkloadProblem>,
    /// Rollout waves, the health gate and reload windows (issue 17).
    pub gates: crate::rules::gates::RolloutGates,
    /// The `ignore` annotation on its metadata (ours: on a resource it is upstream's): `Some(true)` never
    /// reloads it, `Some(false)` reloads it in a namespace that says `ignore` (namespace rules).
    pub ignore: Option<bool>,
}

type Map = BTreeMap<String, String>;

impl WorkloadAnnotations {
    /// Reads the values from the workload's metadata and pod-template annotations.
    pub fn extract(keys: &AnnotationKeys, metadata: Option<&Map>, template: Option<&Map>) -> Self {
        let empty = Map::new();
        let metadata = metadata.unwrap_or(&empty);
        let template = template.unwrap_or(&empty);
        let mut problems = Vec::new();
        let mut selection: [Selection; 3] = Default::default();
        for (i, slot) in selection.iter_mut().enumerate() {
            let selecting = [&keys.named[i], &keys.auto, &keys.typed_auto[i], &keys.search];
            let source = if selecting.iter().any(|k| metadata.contains_key(*k)) { metadata } else { template };
            let named_value = source.get(&keys.named[i]);
            *slot = Selection {
                auto: source.get(&keys.auto).cloned(),
                typed_auto: source.get(&keys.typed_auto[i]).cloned(),
                search: source.get(&keys.search).cloned(),
                named: named_value.map(|v| compile_named(&keys.named[i], v, &mut problems)).unwrap_or_default(),
                remote: named_value.map(|v| compile_remote(&keys.named[i], v, &mut problems)).unwrap_or_default(),
                exclude: metadata
                    .get(&keys.exclude[i])
                    .map(|v| split_list(v).map(str::to_owned).collect())
                    .unwrap_or_default(),
            };
            for key in [&keys.auto, &keys.typed_auto[i]] {
                if let Some(v) = source.get(key)
                    && !v.is_empty()
                    && parse_go_bool(v).is_none()
                    && !problems.iter().any(|p: &WorkloadProblem| &p.key == key)
                {
                    problems.push(WorkloadProblem {
                        key: key.clone(),
                        value: v.clone(),
                        message: format!(
                            "unknown value {v:?} for annotation {key:?}, expected true or false; treated as false \
                             (and it opts the workload out of --auto-reload-all)"
                        ),
                    });
                }
            }
        }
        let keys_used =
            reload_on(&keys.reload_on, metadata.get(&keys.reload_on).or(template.get(&keys.reload_on)), &mut problems);
        let gates = crate::rules::gates::RolloutGates::extract(metadata, &mut problems);
        let ignore = metadata
            .get(&keys.ignore)
            .and_then(|v| crate::rules::values::bool_value(&keys.ignore, v, "it is not ignored", &mut problems));
        Self { selection, keys_used, problems, gates, ignore }
    }

    /// The selection for `kind`.
    pub fn for_kind(&self, kind: ConfigKind) -> &Selection {
        &self.selection[kind_index(kind)]
    }

    /// True when any kind has a named list: such workloads may reload for resources they do not reference.
    pub fn has_named_list(&self) -> bool {
        self.selection.iter().any(|s| !s.named.is_empty())
    }

    /// The names of the kinds' named lists made only of plain names (`reload: "app-config,db"`, the common case):
    /// such a list is a fixed set of names, found like references.
    pub fn named_exactly(&self) -> impl Iterator<Item = (ConfigKind, &str)> {
        ConfigKind::ALL
            .into_iter()
            .filter(|k| self.for_kind(*k).pattern_free())
            .flat_map(|k| self.for_kind(k).named.iter().filter_map(move |p| Some((k, p.exact()?))))
    }

    /// The `<namespace>/<name>` entries of every kind.
    pub fn remote(&self) -> impl Iterator<Item = (ConfigKind, &RemoteEntry)> {
        ConfigKind::ALL.into_iter().flat_map(move |k| self.for_kind(k).remote.iter().map(move |e| (k, e)))
    }

    /// True when a kind's named list has a regex entry: it is matched against the names of the namespace's
    /// resources of that kind.
    pub fn has_pattern_list(&self) -> bool {
        self.selection.iter().any(|s| !s.pattern_free())
    }
}

/// Values of `reload-on` and of `--reload-on`.
pub const RELOAD_ON_KEYS_USED: &str = "keys-used";
/// See [`RELOAD_ON_KEYS_USED`].
pub const RELOAD_ON_ANY_KEY: &str = "any-key";

fn reload_on(key: &str, value: Option<&String>, problems: &mut Vec<WorkloadProblem>) -> Option<bool> {
    match value?.trim() {
        RELOAD_ON_KEYS_USED => Some(true),
        RELOAD_ON_ANY_KEY => Some(false),
        other => {
            problems.push(WorkloadProblem {
                key: key.to_owned(),
                value: other.to_owned(),
                message: format!(
                    "unknown value {other:?} for annotation {key:?}, expected {RELOAD_ON_KEYS_USED} or \
                     {RELOAD_ON_ANY_KEY}; --reload-on decides"
                ),
            });
            None
        }
    }
}

/// Splits a comma list, trimming entries and dropping empty ones.
pub fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// The namespace of a `<namespace>/<name>` entry: its part before the first `/` when that is a namespace name
/// (a regex such as `[^/]+` is not one, and stays a plain entry).
fn remote_namespace(entry: &str) -> Option<(&str, &str)> {
    let (namespace, name) = entry.split_once('/')?;
    is_namespace_name(namespace).then_some((namespace, name))
}

/// Whether `s` can be a namespace's name (a DNS label).
pub fn is_namespace_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The `<namespace>/<name>` entries of a named list. One whose name part is not a resource name (a DNS subdomain:
/// a regex, or anchored) is refused and reported; the other entries still apply.
fn compile_remote(key: &str, value: &str, problems: &mut Vec<WorkloadProblem>) -> Vec<RemoteEntry> {
    let mut out = Vec::new();
    for (entry, (namespace, name)) in split_list(value).filter_map(|e| Some((e, remote_namespace(e)?))) {
        if is_resource_name(name) {
            out.push(RemoteEntry { namespace: namespace.to_owned(), name: name.to_owned() });
        } else {
            problems.push(WorkloadProblem {
                key: key.to_owned(),
                value: value.to_owned(),
                message: format!(
                    "entry {entry:?} in annotation {key:?} refused: a <namespace>/<name> entry names one resource \
                     exactly, never a regex; entry skipped"
                ),
            });
        }
    }
    out
}

/// Whether `name` can be a ConfigMap's, Secret's or SecretProviderClass's name: a DNS subdomain (lower-case
/// letters, digits, `-` and `.`, starting and ending with a letter or digit, at most 253 characters).
fn is_resource_name(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.starts_with(alphanumeric)
        && name.ends_with(alphanumeric)
        && name.chars().all(|c| alphanumeric(c) || c == '-' || c == '.')
}

fn compile_entry(key: &str, value: &str, entry: &str, problems: &mut Vec<WorkloadProblem>) -> Option<NamedPattern> {
    NamedPattern::new(entry)
        .map_err(|e| {
            // upstream v1: the entry is skipped and reported; the other entries still apply.
            problems.push(WorkloadProblem {
                key: key.to_owned(),
                value: value.to_owned(),
                message: format!(
                    "invalid regex {entry:?} in reload annotation {key:?}; entry skipped: {}",
                    e.to_string().lines().last().unwrap_or_default().trim()
                ),
            });
        })
        .ok()
}

fn compile_named(key: &str, value: &str, problems: &mut Vec<WorkloadProblem>) -> Vec<NamedPattern> {
    let mut out = Vec::new();
    for entry in split_list(value).filter(|e| remote_namespace(e).is_none()) {
        out.extend(compile_entry(key, value, entry, problems));
    }
    out
}

#[cfg(test)]
#[path = "annotations_tests.rs"]
mod tests;
