//! Should this workload reload for this resource, and why. Upstream v1's `ShouldReload` precedence
//! (reloader-behaviour.md §1.2) plus its container lookup (§4). Pure: the reason it returns is what logs,
//! Events and `explain` print.

use std::{fmt, sync::Arc};

use crate::constants::{TRUE, annotation::ALLOW_REFERENCES_FROM};
use crate::rules::{
    annotations::{Selection, split_list},
    references::{ConfigUse, Via},
    resource::ConfigKind,
    values::parse_go_bool,
};

/// The facts about a resource that decisions need (never its data).
#[derive(Clone, Copy, Debug)]
pub struct ResourceFacts<'a> {
    /// Kind.
    pub kind: ConfigKind,
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// `ignore` annotation is exactly `"true"`.
    pub ignored: bool,
    /// `match` annotation is exactly `"true"`.
    pub matched: bool,
    /// The namespaces whose workloads may name it from there.
    pub consent: &'a ReferenceConsent,
}

/// Which other namespaces' workloads may name a resource in a `<namespace>/<name>` entry (ours, issue 38): its
/// `reloader.stakater.com/allow-references-from` annotation, a comma list of namespace names, `*` for every
/// namespace. The resource's owner decides, not the tenant who writes the entry; absent, none may. Entries that are
/// neither `*` nor a namespace name are ignored. One pointer per resource in the index, null when absent (the
/// common case): a slice's fat pointer would cost every resource 8 bytes more.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReferenceConsent(Option<Arc<ConsentingNamespaces>>);

/// The entries of a consent, as written.
#[derive(Debug, PartialEq, Eq)]
struct ConsentingNamespaces(Box<[Box<str>]>);

impl ReferenceConsent {
    /// The consent an annotation value gives (`None`: absent).
    pub fn parse(value: Option<&str>) -> Self {
        let valid = |e: &&str| *e == "*" || crate::rules::annotations::is_namespace_name(e);
        let namespaces: Vec<Box<str>> = value.into_iter().flat_map(split_list).filter(valid).map(Box::from).collect();
        Self((!namespaces.is_empty()).then(|| Arc::new(ConsentingNamespaces(namespaces.into()))))
    }

    /// Whether workloads of `namespace` may name the resource.
    pub fn allows(&self, namespace: &str) -> bool {
        self.0.iter().flat_map(|n| n.0.iter()).any(|n| &**n == "*" || &**n == namespace)
    }
}

/// The facts about a workload that decisions need.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadFacts<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its selecting annotations for the resource's kind.
    pub selection: &'a Selection,
    /// Resources its pod spec uses.
    pub uses: &'a [ConfigUse],
    /// Its first container (target for named matches of unreferenced resources).
    pub first_container: Option<&'a str>,
    /// Its own `reloader.stakater.com/ignore` value (ours), over its namespace's.
    pub ignore: Option<bool>,
}

/// Global settings that change decisions.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecisionSettings {
    /// `--auto-reload-all`.
    pub auto_reload_all: bool,
    /// `--reload-on=keys-used`: workloads without a `reload-on` annotation roll only when a key their pod spec
    /// reads changes.
    pub keys_used: bool,
    /// What the workload's namespace says (`--namespace-rules`); set per workload by the index.
    pub namespace: NamespaceRules,
    /// `--allow-cross-namespace-references`: a `<namespace>/<name>` entry of a named list selects a resource of
    /// another namespace.
    pub cross_namespace: bool,
}

/// A Namespace's annotations for every workload in it (ours, issue 29; upstream stakater/Reloader#274), each
/// overridden by the workload's own value of the same annotation. Invalid values are reported and count as
/// absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceRules {
    /// `reloader.stakater.com/auto: "true"`: workloads without an auto value of their own reload for what their
    /// pod spec references, as with `--auto-reload-all` for this namespace.
    pub auto: bool,
    /// `reloader.stakater.com/ignore: "true"`: its workloads are not reloaded (changes made meanwhile are never
    /// applied later, as for an ignored resource).
    pub ignore: bool,
    /// `reloader.stakater.com/pause: "true"`: its workloads' reloads wait until it is lifted, then roll once with
    /// the newest content (a rollout gate).
    pub pause: bool,
}

impl NamespaceRules {
    /// The rules of a Namespace's `auto`, `ignore` and `pause` values as written: `"true"` sets one; an invalid
    /// value counts as absent (the observer reports it).
    pub fn from_values(auto: Option<&str>, ignore: Option<&str>, pause: Option<&str>) -> Self {
        let set = |v: Option<&str>| v.and_then(|v| parse_go_bool(v.trim())).unwrap_or(false);
        Self { auto: set(auto), ignore: set(ignore), pause: set(pause) }
    }

    /// True when none is set.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Why a workload reloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadReason {
    /// Matched an entry of the named list.
    NamedList { pattern: String },
    /// Search mode, and the resource carries `match: "true"`.
    Search { via: Via },
    /// `reloader.stakater.com/auto` (or the typed auto key) is true.
    Auto { via: Via },
    /// `--auto-reload-all`, and the workload has no auto value.
    AutoReloadAll { via: Via },
    /// Its namespace has `auto: "true"`, and the workload has no auto value.
    NamespaceAuto { via: Via },
}

impl fmt::Display for ReloadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NamedList { pattern } => write!(f, "matched named list {pattern:?}"),
            Self::Search { via } => write!(f, "search: resource has match annotation, referenced via {via}"),
            Self::Auto { via } => write!(f, "auto: referenced via {via}"),
            Self::AutoReloadAll { via } => write!(f, "auto-reload-all: referenced via {via}"),
            Self::NamespaceAuto { via } => write!(f, "namespace auto: its namespace has auto, referenced via {via}"),
        }
    }
}

/// Why a workload does not reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The resource has `ignore: "true"`.
    Ignored,
    /// The workload has `ignore: "true"`.
    WorkloadIgnored,
    /// Its namespace has `ignore: "true"`, and the workload has no ignore value.
    NamespaceIgnored,
    /// The resource is in the workload's exclude list.
    Excluded,
    /// Auto or search mode applies but the pod spec does not use the resource.
    NotReferenced,
    /// No annotation selects this resource.
    NotSelected,
    /// The workload has no containers.
    NoContainer,
    /// A `<namespace>/<name>` entry names it, from another namespace, without `--allow-cross-namespace-references`.
    CrossNamespaceRefused,
    /// A `<namespace>/<name>` entry names it, from a namespace its `allow-references-from` does not name.
    CrossNamespaceNotConsented,
}

impl SkipReason {
    /// A cross-namespace reference refused: unlike an opt-out it leaves no trace on the workload (issue 38), so
    /// that the workload shows nothing of the resource — not whether it exists, nor when it changes.
    pub fn is_cross_namespace_refusal(&self) -> bool {
        matches!(self, Self::CrossNamespaceRefused | Self::CrossNamespaceNotConsented)
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ignored => "ignored: resource has the ignore annotation",
            Self::WorkloadIgnored => "ignored: workload has the ignore annotation",
            Self::NamespaceIgnored => "ignored: its namespace has the ignore annotation",
            Self::Excluded => "excluded: resource is in the workload's exclude list",
            Self::NotReferenced => "not referenced: auto/search mode needs the pod spec to use the resource",
            Self::NotSelected => "no matching annotation",
            Self::NoContainer => "workload has no containers",
            Self::CrossNamespaceRefused => {
                "cross-namespace reference refused: the controller runs without --allow-cross-namespace-references"
            }
            Self::CrossNamespaceNotConsented => {
                return write!(
                    f,
                    "cross-namespace reference refused: the resource's {ALLOW_REFERENCES_FROM} does not name the \
                     workload's namespace"
                );
            }
        })
    }
}

/// The outcome of [`decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadDecision {
    /// Reload, writing the env var into `container`.
    Reload { container: String, reason: ReloadReason },
    /// Do not reload.
    Skip(SkipReason),
}

/// Decides whether `workload` reloads when `resource` changes.
pub fn decide(
    workload: &WorkloadFacts<'_>,
    resource: &ResourceFacts<'_>,
    settings: DecisionSettings,
) -> ReloadDecision {
    use ReloadDecision::{Reload, Skip};
    let s = workload.selection;
    if resource.ignored {
        return Skip(SkipReason::Ignored);
    }
    match workload.ignore {
        Some(true) => return Skip(SkipReason::WorkloadIgnored),
        None if settings.namespace.ignore => return Skip(SkipReason::NamespaceIgnored),
        _ => {}
    }
    let remote = s.remote.iter().find(|e| e.names(resource.namespace, resource.name));
    if resource.namespace != workload.namespace {
        // Only a `<namespace>/<name>` entry selects a resource of another namespace: a pod spec cannot use one.
        let Some(entry) = remote else { return Skip(SkipReason::NotSelected) };
        if !settings.cross_namespace {
            return Skip(SkipReason::CrossNamespaceRefused);
        }
        if !resource.consent.allows(workload.namespace) {
            return Skip(SkipReason::CrossNamespaceNotConsented);
        }
        let pattern = entry.to_string();
        return match workload.first_container {
            Some(c) => Reload { container: c.to_owned(), reason: ReloadReason::NamedList { pattern } },
            None => Skip(SkipReason::NoContainer),
        };
    }
    if s.exclude.iter().any(|e| e == resource.name) {
        return Skip(SkipReason::Excluded);
    }
    let used = workload.uses.iter().find(|u| u.kind == resource.kind && u.name == resource.name);
    // Named list: reload even when the pod spec does not use the resource (then into the first container). An
    // entry naming the workload's own namespace (`<own>/<name>`) is a plain one.
    let named = s.named.iter().find(|p| p.matches(resource.name)).map(|p| p.text.clone());
    if let Some(pattern) = named.or_else(|| remote.map(ToString::to_string)) {
        let container = used.map(|u| u.container.as_str()).or(workload.first_container);
        return match container {
            Some(c) => Reload { container: c.to_owned(), reason: ReloadReason::NamedList { pattern } },
            None => Skip(SkipReason::NoContainer),
        };
    }
    let auto_mode: Option<fn(Via) -> ReloadReason> = if s.search.as_deref() == Some(TRUE) && resource.matched {
        Some(|via| ReloadReason::Search { via })
    } else if is_true(&s.auto) || is_true(&s.typed_auto) {
        Some(|via| ReloadReason::Auto { via })
    } else if settings.auto_reload_all && is_empty(&s.auto) && is_empty(&s.typed_auto) {
        // upstream v1: an absent or empty auto value enables auto-reload-all; any other value opts out.
        Some(|via| ReloadReason::AutoReloadAll { via })
    } else if settings.namespace.auto && is_empty(&s.auto) && is_empty(&s.typed_auto) {
        // As --auto-reload-all, for the namespace: `auto: "false"` on the workload opts out.
        Some(|via| ReloadReason::NamespaceAuto { via })
    } else {
        None
    };
    match (auto_mode, used) {
        (None, _) => Skip(SkipReason::NotSelected),
        (Some(_), None) => Skip(SkipReason::NotReferenced),
        (Some(reason), Some(u)) => Reload { container: u.container.clone(), reason: reason(u.via) },
    }
}

fn is_true(v: &Option<String>) -> bool {
    v.as_deref().and_then(parse_go_bool).unwrap_or(false)
}

fn is_empty(v: &Option<String>) -> bool {
    v.as_deref().is_none_or(str::is_empty)
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;
