//! The decision's rules with exact expected reasons (upstream's selection rules, reloader-behaviour.md §1).

use super::*;
use crate::constants::annotation as key;
use crate::rules::annotations::{AnnotationKeys, WorkloadAnnotations};
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
    let r = ResourceFacts { kind: CM, namespace: "ns", name: res.0, ignored: res.1, matched: res.2, consent: &consent };
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
    assert!(matches!(run(&[(key::AUTO, "True")], &uses, ("cm", false, false), false), ReloadDecision::Reload { .. }));
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
        let r =
            ResourceFacts { kind: CM, namespace: "ns", name: "cm", ignored: false, matched: false, consent: &consent };
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
        let r = ResourceFacts { kind: CM, namespace, name: "cfg", ignored: false, matched: false, consent: &consent };
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
    assert_eq!(["a", "b-1", "B", "*x", "-c", "c"].map(|n| consent.allows(n)), [true, true, false, false, false, false]);
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
