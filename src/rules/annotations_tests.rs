//! Unit tests of `annotations`: reading the selecting values, named lists and their regexes, problems.

use super::*;

fn map(pairs: &[(&str, &str)]) -> Map {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn extract(meta: &[(&str, &str)], tmpl: &[(&str, &str)]) -> WorkloadAnnotations {
    WorkloadAnnotations::extract(&AnnotationKeys::default(), Some(&map(meta)), Some(&map(tmpl)))
}

#[test]
fn metadata_wins_when_it_has_any_selecting_key_for_the_kind() {
    let a = extract(&[(default::SEARCH, "true")], &[(default::AUTO, "true")]);
    let cm = a.for_kind(ConfigKind::ConfigMap);
    assert_eq!(cm.search.as_deref(), Some("true"));
    assert_eq!(cm.auto, None, "template values are not mixed in when metadata has a selecting key");
}

#[test]
fn template_is_read_when_metadata_has_no_selecting_key() {
    let a = extract(&[("unrelated", "x")], &[(default::AUTO, "true")]);
    assert_eq!(a.for_kind(ConfigKind::Secret).auto.as_deref(), Some("true"));
}

#[test]
fn source_is_chosen_per_kind_via_the_typed_keys() {
    let a = extract(&[(default::SECRET_RELOAD, "s")], &[(default::CONFIGMAP_RELOAD, "c")]);
    assert_eq!(a.for_kind(ConfigKind::Secret).named.len(), 1);
    assert_eq!(a.for_kind(ConfigKind::ConfigMap).named[0].text, "c");
}

#[test]
fn exclude_is_read_from_metadata_only() {
    let a = extract(&[], &[(default::CONFIGMAP_EXCLUDE, "a")]);
    assert!(a.for_kind(ConfigKind::ConfigMap).exclude.is_empty());
    let a = extract(&[(default::CONFIGMAP_EXCLUDE, " a , b ,")], &[]);
    assert_eq!(a.for_kind(ConfigKind::ConfigMap).exclude, vec!["a", "b"]);
}

#[test]
fn named_entries_are_anchored_regexes_and_bad_ones_are_reported_not_fatal() {
    let a = extract(&[(default::CONFIGMAP_RELOAD, "app-.*, (broken, plain")], &[]);
    let named = &a.for_kind(ConfigKind::ConfigMap).named;
    assert_eq!(named.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(), vec!["app-.*", "plain"]);
    assert!(named[0].matches("app-config"));
    assert!(!named[0].matches("my-app-config"), "anchored at the start");
    assert!(!named[1].matches("plainx"), "anchored at the end");
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].key, default::CONFIGMAP_RELOAD);
    assert!(
        a.problems[0].message.starts_with("invalid regex \"(broken\" in reload annotation"),
        "{}",
        a.problems[0].message
    );
}

/// Plain names (also written `^name$`) are compared as strings; what matches is what the regex matches.
#[test]
fn plain_names_match_exactly_as_their_anchored_regex_would() {
    let names = ["cm-5", "cm-50", "xcm-5", "cm_5", "CM-5", "cm.5", ""];
    for entry in ["cm-5", "^cm-5$", "cm_5", "CM-5", "cm.5", "^cm-5", "cm-5$", "cm-(5|50)"] {
        let pattern = NamedPattern::new(entry).expect("valid");
        let regex = Regex::new(&format!("^(?:{entry})$")).expect("regex");
        for name in names {
            assert_eq!(pattern.matches(name), regex.is_match(name), "{entry:?} against {name:?}");
        }
    }
    assert!(matches!(NamedPattern::new("^cm-5$").map(|p| p.matcher), Ok(Matcher::Exact(n)) if n == "cm-5"));
    assert!(matches!(NamedPattern::new("cm.5").map(|p| p.matcher), Ok(Matcher::Regex(_))), "`.` is any character");
}

/// Workloads writing the same regex entry share one compiled regex; it goes when none holds it.
#[test]
fn equal_regex_entries_share_one_compiled_regex() {
    let regex = |p: NamedPattern| match p.matcher {
        Matcher::Regex(r) => r,
        Matcher::Exact(_) => panic!("a regex entry"),
    };
    let entry = "shared-(a|b)-[0-9]+";
    let (a, b) = (regex(NamedPattern::new(entry).expect("valid")), regex(NamedPattern::new(entry).expect("valid")));
    assert!(Arc::ptr_eq(&a, &b), "one compiled regex");
    assert!(a.is_match("shared-a-1") && !a.is_match("shared-c-1"));
    drop((a, b));
    let cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    assert!(cache.get(entry).is_some_and(|w| w.upgrade().is_none()), "held by no workload: swept later");
}

#[test]
fn unknown_auto_values_are_reported_once() {
    let a = extract(&[(default::AUTO, "yes")], &[]);
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].value, "yes");
}

#[test]
fn go_parse_bool_accepts_exactly_gos_spellings() {
    for t in ["1", "t", "T", "TRUE", "true", "True"] {
        assert_eq!(parse_go_bool(t), Some(true), "{t}");
    }
    for f in ["0", "f", "F", "FALSE", "false", "False"] {
        assert_eq!(parse_go_bool(f), Some(false), "{f}");
    }
    for x in ["yes", "tRUE", "", " true"] {
        assert_eq!(parse_go_bool(x), None, "{x:?}");
    }
}

/// Issue 38: a `<namespace>/<name>` entry names one resource exactly (a name may hold dots); one with a regex is
/// refused and reported — matched against another namespace's names, it would tell which exist there.
#[test]
fn a_namespace_slash_name_entry_names_one_resource_exactly_and_a_regex_there_is_refused() {
    let a = extract(&[(default::CONFIGMAP_RELOAD, "own-.*, b/cfg, b/my.config, b/cfg-.*, b/^cfg$")], &[]);
    let cm = a.for_kind(ConfigKind::ConfigMap);
    let entry = |namespace: &str, name: &str| RemoteEntry { namespace: namespace.into(), name: name.into() };
    assert_eq!(cm.remote, [entry("b", "cfg"), entry("b", "my.config")]);
    assert_eq!(cm.named.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(), ["own-.*"]);
    let problems: Vec<&str> = a.problems.iter().map(|p| p.message.as_str()).collect();
    let refused = |entry: &str| {
        format!(
            "entry {entry:?} in annotation \"configmap.reloader.stakater.com/reload\" refused: a <namespace>/<name> \
             entry names one resource exactly, never a regex; entry skipped"
        )
    };
    assert_eq!(problems, [refused("b/cfg-.*"), refused("b/^cfg$")]);
    assert!(cm.remote[0].names("b", "cfg") && !cm.remote[0].names("a", "cfg") && !cm.remote[0].names("b", "cfg-1"));
    assert_eq!(cm.remote[1].to_string(), "b/my.config");
}
