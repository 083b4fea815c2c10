//! Should this workload reload for this resource, and why. Upstream v1's `ShouldReload` precedence
//! (reloader-behaviour.md §1.2) plus its container lookup (§4). Pure: the reason it returns is what logs,
//! Events and `explain` print.

use std::{fmt, sync::Arc};

use crate::{
    annotations::{Selection, split_list},
    constants::{TRUE, annotation::ALLOW_REFERENCES_FROM},
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
        let valid = |e: &&str| *e == "*" || crate::annotations::is_namespace_name(e);
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
mod tests {
    use super::*;
    use crate::annotations::{AnnotationKeys, WorkloadAnnotations};
    use crate::constants::annotation as key;
    use std::collections::BTreeMap;

    const CM: ConfigKind = ConfigKind::ConfigMap;

    fn annotations(meta: &[(&str, &str)]) -> WorkloadAnnotations {
        let m: BTreeMap<String, String> = meta.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        WorkloadAnnotations::extract(&AnnotationKeys::default(), Some(&m), None)
    }

    fn used(name: &str, container: &str, via: Via) -> ConfigUse {
        ConfigUse { kind: CM, name: name.into(), container: container.into(), via, init_container: false, keys: None }
    }

    fn run(meta: &[(&str, &str)], uses: &[ConfigUse], res: (&str, bool, bool), all: bool) -> ReloadDecision {
        let a = annotations(meta);
        let w = WorkloadFacts {
            namespace: "ns",
            selection: a.for_kind(CM),
            uses,
            first_container: Some("first"),
            ignore: a.ignore,
        };
        let consent = ReferenceConsent::default();
        let r =
            ResourceFacts { kind: CM, namespace: "ns", name: res.0, ignored: res.1, matched: res.2, consent: &consent };
        decide(&w, &r, DecisionSettings { auto_reload_all: all, ..DecisionSettings::default() })
    }

    fn reload(container: &str, reason: ReloadReason) -> ReloadDecision {
        ReloadDecision::Reload { container: container.into(), reason }
    }

    const SKIP_NOT_SELECTED: ReloadDecision = ReloadDecision::Skip(SkipReason::NotSelected);

    #[test]
    fn auto_reloads_referenced_resources_into_the_using_container() {
        let uses = [used("cm", "app", Via::EnvFrom)];
        assert_eq!(
            run(&[(key::AUTO, "true")], &uses, ("cm", false, false), false),
            reload("app", ReloadReason::Auto { via: Via::EnvFrom })
        );
    }

    #[test]
    fn auto_needs_a_reference() {
        assert_eq!(
            run(&[(key::AUTO, "true")], &[], ("cm", false, false), false),
            ReloadDecision::Skip(SkipReason::NotReferenced)
        );
    }

    #[test]
    fn typed_auto_counts_for_its_own_kind_only() {
        let uses = [used("cm", "app", Via::Volume)];
        assert_eq!(
            run(&[(key::CONFIGMAP_AUTO, "true")], &uses, ("cm", false, false), false),
            reload("app", ReloadReason::Auto { via: Via::Volume })
        );
        assert_eq!(run(&[(key::SECRET_AUTO, "true")], &uses, ("cm", false, false), false), SKIP_NOT_SELECTED);
    }

    #[test]
    fn auto_accepts_go_bool_spellings() {
        let uses = [used("cm", "app", Via::Volume)];
        assert!(matches!(
            run(&[(key::AUTO, "True")], &uses, ("cm", false, false), false),
            ReloadDecision::Reload { .. }
        ));
        assert!(matches!(run(&[(key::AUTO, "1")], &uses, ("cm", false, false), false), ReloadDecision::Reload { .. }));
        assert_eq!(run(&[(key::AUTO, "yes")], &uses, ("cm", false, false), false), SKIP_NOT_SELECTED);
    }

    #[test]
    fn named_list_reloads_unreferenced_resources_into_the_first_container() {
        let r = run(&[(key::CONFIGMAP_RELOAD, "other, app-.*")], &[], ("app-config", false, false), false);
        assert_eq!(r, reload("first", ReloadReason::NamedList { pattern: "app-.*".into() }));
    }

    #[test]
    fn named_list_uses_the_referencing_container_when_there_is_one() {
        let uses = [used("cm", "side", Via::Volume)];
        assert_eq!(
            run(&[(key::CONFIGMAP_RELOAD, "cm")], &uses, ("cm", false, false), false),
            reload("side", ReloadReason::NamedList { pattern: "cm".into() })
        );
    }

    #[test]
    fn named_entries_are_regexes_so_a_dot_matches_any_character() {
        assert!(matches!(
            run(&[(key::CONFIGMAP_RELOAD, "my.cm")], &[], ("myxcm", false, false), false),
            ReloadDecision::Reload { .. }
        ));
    }

    #[test]
    fn search_needs_match_on_the_resource_and_a_reference() {
        let uses = [used("cm", "app", Via::EnvValueFrom)];
        let search = [(key::SEARCH, "true")];
        assert_eq!(
            run(&search, &uses, ("cm", false, true), false),
            reload("app", ReloadReason::Search { via: Via::EnvValueFrom })
        );
        assert_eq!(run(&search, &uses, ("cm", false, false), false), SKIP_NOT_SELECTED);
        assert_eq!(run(&search, &[], ("cm", false, true), false), ReloadDecision::Skip(SkipReason::NotReferenced));
    }

    #[test]
    fn ignore_on_the_resource_beats_everything() {
        let uses = [used("cm", "app", Via::Volume)];
        assert_eq!(
            run(&[(key::CONFIGMAP_RELOAD, "cm")], &uses, ("cm", true, false), true),
            ReloadDecision::Skip(SkipReason::Ignored)
        );
    }

    #[test]
    fn exclude_beats_named_auto_and_auto_reload_all_and_is_exact() {
        let uses = [used("cm", "app", Via::Volume)];
        let meta = [(key::CONFIGMAP_EXCLUDE, "cm"), (key::CONFIGMAP_RELOAD, "cm"), (key::AUTO, "true")];
        assert_eq!(run(&meta, &uses, ("cm", false, false), true), ReloadDecision::Skip(SkipReason::Excluded));
        let meta = [(key::CONFIGMAP_EXCLUDE, "c."), (key::AUTO, "true")];
        assert!(
            matches!(run(&meta, &uses, ("cm", false, false), false), ReloadDecision::Reload { .. }),
            "exclude is not a regex"
        );
    }

    #[test]
    fn auto_reload_all_applies_to_workloads_without_an_auto_value() {
        let uses = [used("cm", "app", Via::Volume)];
        assert_eq!(
            run(&[], &uses, ("cm", false, false), true),
            reload("app", ReloadReason::AutoReloadAll { via: Via::Volume })
        );
        assert_eq!(
            run(&[(key::AUTO, "")], &uses, ("cm", false, false), true),
            reload("app", ReloadReason::AutoReloadAll { via: Via::Volume })
        );
        assert_eq!(run(&[], &uses, ("cm", false, false), false), SKIP_NOT_SELECTED);
        assert_eq!(run(&[], &[], ("cm", false, false), true), ReloadDecision::Skip(SkipReason::NotReferenced));
    }

    #[test]
    fn auto_false_or_any_unparsable_value_opts_out_of_auto_reload_all() {
        let uses = [used("cm", "app", Via::Volume)];
        assert_eq!(run(&[(key::AUTO, "false")], &uses, ("cm", false, false), true), SKIP_NOT_SELECTED);
        assert_eq!(run(&[(key::AUTO, "yes")], &uses, ("cm", false, false), true), SKIP_NOT_SELECTED);
        // Typed auto "false" only opts out its own kind (a Secret change would still reload).
        assert_eq!(run(&[(key::CONFIGMAP_AUTO, "false")], &uses, ("cm", false, false), true), SKIP_NOT_SELECTED);
    }

    /// Namespace rules (issue 29): a namespace's `auto` and `ignore` are defaults the workload's own values override.
    #[test]
    fn namespace_auto_and_ignore_apply_unless_the_workload_says_otherwise() {
        let uses = [used("cm", "app", Via::Volume)];
        let decide_in = |meta: &[(&str, &str)], rules: NamespaceRules| {
            let a = annotations(meta);
            let selection = a.for_kind(CM);
            let w = WorkloadFacts { namespace: "ns", selection, uses: &uses, first_container: None, ignore: a.ignore };
            let consent = ReferenceConsent::default();
            let r = ResourceFacts {
                kind: CM,
                namespace: "ns",
                name: "cm",
                ignored: false,
                matched: false,
                consent: &consent,
            };
            decide(&w, &r, DecisionSettings { namespace: rules, ..DecisionSettings::default() })
        };
        let auto = NamespaceRules { auto: true, ..NamespaceRules::default() };
        let ignore = NamespaceRules { ignore: true, ..NamespaceRules::default() };
        let namespace_auto = reload("app", ReloadReason::NamespaceAuto { via: Via::Volume });
        assert_eq!(decide_in(&[], auto), namespace_auto);
        assert_eq!(decide_in(&[(key::AUTO, "false")], auto), SKIP_NOT_SELECTED, "the workload opts out");
        assert_eq!(decide_in(&[], NamespaceRules::default()), SKIP_NOT_SELECTED);
        let auto_annotated = [(key::AUTO, "true")];
        assert_eq!(decide_in(&auto_annotated, ignore), ReloadDecision::Skip(SkipReason::NamespaceIgnored));
        assert_eq!(
            decide_in(&[(key::AUTO, "true"), (key::IGNORE, "false")], ignore),
            reload("app", ReloadReason::Auto { via: Via::Volume }),
            "the workload opts back in"
        );
        assert_eq!(
            decide_in(&[(key::AUTO, "true"), (key::IGNORE, "true")], NamespaceRules::default()),
            ReloadDecision::Skip(SkipReason::WorkloadIgnored)
        );
        assert_eq!(
            ReloadReason::NamespaceAuto { via: Via::Volume }.to_string(),
            "namespace auto: its namespace has auto, referenced via volume"
        );
        assert_eq!(SkipReason::NamespaceIgnored.to_string(), "ignored: its namespace has the ignore annotation");
        assert_eq!(
            NamespaceRules::from_values(Some("true"), Some("yes"), Some(" True ")),
            NamespaceRules { auto: true, ignore: false, pause: true }
        );
    }

    /// Issue 38: another namespace's resource reloads only with `--allow-cross-namespace-references` and its
    /// consent naming the workload's namespace (or `*`).
    #[test]
    fn another_namespaces_resource_reloads_only_with_the_flag_and_its_consent() {
        let a = annotations(&[(key::CONFIGMAP_RELOAD, "other/cfg")]);
        let w = WorkloadFacts {
            namespace: "ns",
            selection: a.for_kind(CM),
            uses: &[],
            first_container: Some("first"),
            ignore: None,
        };
        let decide_with = |namespace: &str, consent: Option<&str>, cross_namespace: bool| {
            let consent = ReferenceConsent::parse(consent);
            let r =
                ResourceFacts { kind: CM, namespace, name: "cfg", ignored: false, matched: false, consent: &consent };
            decide(&w, &r, DecisionSettings { cross_namespace, ..DecisionSettings::default() })
        };
        let refused = ReloadDecision::Skip(SkipReason::CrossNamespaceRefused);
        let not_consented = ReloadDecision::Skip(SkipReason::CrossNamespaceNotConsented);
        let reloads = reload("first", ReloadReason::NamedList { pattern: "other/cfg".into() });
        assert_eq!(decide_with("other", Some("ns"), false), refused);
        assert_eq!(decide_with("other", None, true), not_consented);
        assert_eq!(decide_with("other", Some("ns-2, nsx"), true), not_consented);
        assert_eq!(decide_with("other", Some("ns"), true), reloads);
        assert_eq!(decide_with("other", Some(" a , ns "), true), reloads);
        assert_eq!(decide_with("other", Some("*"), true), reloads);
        assert_eq!(decide_with("third", Some("*"), true), SKIP_NOT_SELECTED, "the entry names other/cfg only");
        assert!(SkipReason::CrossNamespaceRefused.is_cross_namespace_refusal());
        assert!(SkipReason::CrossNamespaceNotConsented.is_cross_namespace_refusal());
        assert!(!SkipReason::Excluded.is_cross_namespace_refusal());
        assert_eq!(
            SkipReason::CrossNamespaceNotConsented.to_string(),
            "cross-namespace reference refused: the resource's reloader.stakater.com/allow-references-from does not \
             name the workload's namespace"
        );
    }

    #[test]
    fn consent_takes_namespace_names_and_a_star_and_ignores_the_rest() {
        let consent = ReferenceConsent::parse(Some("a, B, b-1,, *x, -c"));
        assert_eq!(
            ["a", "b-1", "B", "*x", "-c", "c"].map(|n| consent.allows(n)),
            [true, true, false, false, false, false]
        );
        assert!(ReferenceConsent::parse(Some(" * ")).allows("anything"));
        assert_eq!(ReferenceConsent::parse(None), ReferenceConsent::default());
        assert_eq!(ReferenceConsent::parse(Some("B, *x")), ReferenceConsent::default());
        assert!(!ReferenceConsent::default().allows("a"));
        assert_eq!(std::mem::size_of::<ReferenceConsent>(), std::mem::size_of::<usize>(), "one pointer per resource");
    }

    #[test]
    fn reasons_read_well_in_logs() {
        assert_eq!(ReloadReason::NamedList { pattern: "app-.*".into() }.to_string(), "matched named list \"app-.*\"");
        assert_eq!(ReloadReason::Auto { via: Via::EnvFrom }.to_string(), "auto: referenced via envFrom");
    }
}
