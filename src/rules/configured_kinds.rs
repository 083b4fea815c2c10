//! Workload kinds added by configuration (issue 29): `--workload-kind <group>/<version>/<Kind>[=<path>]`, or a
//! preset by its short name (`knative-service`, `kruise-cloneset`, `kruise-statefulset`, `kruise-daemonset`).
//! Upstream reloads only the kinds wired in its code (stakater/Reloader#493, #969, #1005, #555, #628).
//!
//! A configured kind is any namespaced object that embeds a pod template (default path `spec.template`), or with
//! `=-` one that does not (StrimziPodSet: its references are read from its pods, and its pods are restarted,
//! `crate::rules::pod_restarts`). It is read and written as JSON (fields this binary does not know survive), watched
//! once discovery finds its API (like Argo Rollouts), and reloaded with the same annotations, records, strategies
//! and gates as the built-in kinds. Its facts are registered once at startup, before anything reads them, so that
//! [`crate::rules::keys::WorkloadKind::Configured`] stays a small `Copy` value: a slot in [`registered`].
//!
//! No client, no I/O: the registry is filled from the flags; discovery and watching are the controller's.

use std::sync::OnceLock;

/// At most this many configured kinds (each is one slot of the kind table).
pub const MAX: usize = 8;

/// How a configured kind's status tells that a rollout is complete (the restart budget, the health gate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusRule {
    /// Unknown status shape: its rollouts are not tracked (as CronJobs: never counted, never waited for).
    Untracked,
    /// `observedGeneration` ≥ `generation` and the `Ready` condition `True` (Knative); `Ready: False` failed.
    ReadyCondition,
    /// `observedGeneration` ≥ `generation` and `replicas`, `updatedReplicas`, `readyReplicas` all equal to
    /// `spec.replicas` (OpenKruise CloneSet and Advanced StatefulSet).
    Replicas,
    /// `observedGeneration` ≥ `generation` and `updatedNumberScheduled`, `numberAvailable` equal to
    /// `desiredNumberScheduled` (OpenKruise Advanced DaemonSet).
    DaemonSet,
}

/// One configured kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfiguredKind {
    /// API group (`apps.kruise.io`).
    pub group: &'static str,
    /// API version (`v1alpha1`).
    pub version: &'static str,
    /// Kind (`CloneSet`).
    pub kind: &'static str,
    /// `group/version`.
    pub api_version: &'static str,
    /// Resource plural: the conventional one; discovery's wins ([`plural`]).
    plural: &'static str,
    /// `plural.group`, as RBAC names it, with the conventional plural.
    resource: &'static str,
    /// Where the pod template is, as a JSON pointer into the object (`/spec/template`); empty for a kind without
    /// one (`=-`: its references are read from its pods, and its pods are restarted).
    pub template_pointer: &'static str,
    /// Its status rule.
    pub status: StatusRule,
    /// Knative: a template with `metadata.name` names its revision, and a changed template needs a new name.
    pub named_revisions: bool,
    /// The preset it came from, if any.
    pub preset: Option<&'static str>,
}

/// The presets users name by short name.
pub const PRESETS: [&str; 4] = ["knative-service", "kruise-cloneset", "kruise-statefulset", "kruise-daemonset"];

/// Why a `--workload-kind` value is refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum KindError {
    /// Not `<group>/<version>/<Kind>[=<path>]` nor a preset.
    #[error(
        "--workload-kind {0:?}: expected <group>/<version>/<Kind>[=<path to the pod template>] or one of {presets}",
        presets = PRESETS.join(", ")
    )]
    Syntax(String),
    /// The path is not under `spec`.
    #[error("--workload-kind {0:?}: the pod template path must be under spec (spec.template)")]
    Path(String),
    /// A built-in kind, or the same kind twice.
    #[error("--workload-kind {0:?}: {1} is reloaded already")]
    Duplicate(String, String),
    /// More than [`MAX`].
    #[error("--workload-kind: at most {MAX} kinds")]
    TooMany,
}

fn leak(s: String) -> &'static str {
    // Registered once per process, at most MAX kinds: a few bytes that live as long as the process anyway.
    Box::leak(s.into_boxed_str())
}

/// The conventional plural of a kind (what `kubectl` and CRDs use unless the CRD says otherwise).
fn conventional_plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') || lower.ends_with('x') || lower.ends_with("ch") || lower.ends_with("sh") {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'i', 'o', 'u'])) {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

impl ConfiguredKind {
    fn new(group: &str, version: &str, kind: &str, template: &str, status: StatusRule) -> Self {
        Self {
            group: leak(group.to_owned()),
            version: leak(version.to_owned()),
            kind: leak(kind.to_owned()),
            api_version: leak(format!("{group}/{version}")),
            plural: leak(conventional_plural(kind)),
            resource: leak(format!("{}.{group}", conventional_plural(kind))),
            template_pointer: match template {
                "-" => "",
                path => leak(format!("/{}", path.replace('.', "/"))),
            },
            status,
            named_revisions: false,
            preset: None,
        }
    }

    /// A preset by its short name.
    pub fn preset(name: &str) -> Option<Self> {
        let (group, version, kind, status) = match name {
            "knative-service" => ("serving.knative.dev", "v1", "Service", StatusRule::ReadyCondition),
            "kruise-cloneset" => ("apps.kruise.io", "v1alpha1", "CloneSet", StatusRule::Replicas),
            "kruise-statefulset" => ("apps.kruise.io", "v1beta1", "StatefulSet", StatusRule::Replicas),
            "kruise-daemonset" => ("apps.kruise.io", "v1alpha1", "DaemonSet", StatusRule::DaemonSet),
            _ => return None,
        };
        let preset = PRESETS.into_iter().find(|p| *p == name);
        let named_revisions = name == "knative-service";
        Some(Self { named_revisions, preset, ..Self::new(group, version, kind, "spec.template", status) })
    }

    /// A `--workload-kind` value.
    pub fn parse(value: &str) -> Result<Self, KindError> {
        let value = value.trim();
        if let Some(preset) = Self::preset(value) {
            return Ok(preset);
        }
        let (gvk, path) = match value.split_once('=') {
            Some((gvk, path)) => (gvk, path.trim()),
            None => (value, "spec.template"),
        };
        let parts: Vec<&str> = gvk.split('/').map(str::trim).collect();
        let name_like = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        let [group, version, kind] = parts[..] else { return Err(KindError::Syntax(value.to_owned())) };
        let kind_like =
            kind.starts_with(|c: char| c.is_ascii_uppercase()) && kind.chars().all(|c| c.is_ascii_alphanumeric());
        if !(name_like(group) && name_like(version) && kind_like) {
            return Err(KindError::Syntax(value.to_owned()));
        }
        if path == "-" {
            return Ok(Self::new(group, version, kind, path, StatusRule::Untracked));
        }
        let segments_ok = path.split('.').all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
        if !path.starts_with("spec.") || !segments_ok {
            return Err(KindError::Path(value.to_owned()));
        }
        Ok(Self::new(group, version, kind, path, StatusRule::Untracked))
    }

    /// It embeds a pod template (else `=-`: its references are read from its pods, which are restarted).
    pub fn has_template(&self) -> bool {
        !self.template_pointer.is_empty()
    }

    /// Whether `name` names it the way `kubectl` would ([`names_kind`]).
    fn named(&self, plural: &str, name: &str) -> bool {
        names_kind(name, (self.group, self.kind, plural))
    }
}

/// Whether `name` (lower case) names the kind `(group, Kind, plural)` the way `kubectl` would: its kind or plural in
/// lower case, alone or with its group (`cloneset`, `clonesets.apps.kruise.io`). `explain`'s discovery of a kind
/// the flags did not configure names it by the same rule.
pub fn names_kind(name: &str, (group, kind, plural): (&str, &str, &str)) -> bool {
    let (base, named_group) = match name.split_once('.') {
        Some((base, named_group)) => (base, Some(named_group)),
        None => (name, None),
    };
    (base == kind.to_ascii_lowercase() || base == plural) && named_group.is_none_or(|g| g == group)
}

static REGISTERED: OnceLock<Vec<ConfiguredKind>> = OnceLock::new();
static LEARNED: [OnceLock<(&'static str, &'static str)>; MAX] = [const { OnceLock::new() }; MAX];

/// Registers the configured kinds, once per process (the flags are read once); registering none or the same list
/// again is a no-op, another list an error. A kind `built_in(group, kind)` says is built in is refused: it is
/// reloaded already (the kind table says which are, `crate::workload::kinds::is_built_in`).
pub fn register(kinds: Vec<ConfiguredKind>, built_in: impl Fn(&str, &str) -> bool) -> Result<(), KindError> {
    if kinds.len() > MAX {
        return Err(KindError::TooMany);
    }
    for (i, k) in kinds.iter().enumerate() {
        if built_in(k.group, k.kind) || kinds[..i].iter().any(|o| o.group == k.group && o.kind == k.kind) {
            return Err(KindError::Duplicate(k.api_version.to_owned(), format!("{} ({})", k.kind, k.group)));
        }
    }
    if kinds.is_empty() {
        return Ok(());
    }
    let stored = REGISTERED.get_or_init(|| kinds.clone());
    if *stored == kinds {
        Ok(())
    } else {
        Err(KindError::Duplicate("(registered twice)".into(), "another list of kinds".into()))
    }
}

/// The registered kinds, in slot order (empty before [`register`]).
pub fn registered() -> &'static [ConfiguredKind] {
    REGISTERED.get().map_or(&[], Vec::as_slice)
}

/// The kind in `slot`.
pub fn get(slot: u8) -> Option<&'static ConfiguredKind> {
    registered().get(usize::from(slot))
}

/// The resource plural of the kind in `slot`: what discovery found, else the conventional one.
pub fn plural(slot: u8) -> &'static str {
    let learned = LEARNED.get(usize::from(slot)).and_then(OnceLock::get).map(|(plural, _)| *plural);
    learned.or_else(|| get(slot).map(|k| k.plural)).unwrap_or("")
}

/// `plural.group` of the kind in `slot`, as RBAC names it.
pub fn api_resource(slot: u8) -> &'static str {
    let learned = LEARNED.get(usize::from(slot)).and_then(OnceLock::get).map(|(_, resource)| *resource);
    learned.or_else(|| get(slot).map(|k| k.resource)).unwrap_or("")
}

/// The slot of the kind `name` names the way `kubectl` would (`cloneset`, `clonesets.apps.kruise.io`).
pub fn slot_named(name: &str) -> Option<u8> {
    let slot = registered().iter().enumerate().position(|(i, k)| k.named(plural(i as u8), name))?;
    u8::try_from(slot).ok()
}

/// Records the plural discovery found for the kind in `slot` (its CRD may not use the conventional one).
pub fn set_plural(slot: u8, plural: &str) {
    if let Some(kind) = get(slot) {
        let learned = (leak(plural.to_owned()), leak(format!("{plural}.{}", kind.group)));
        if let Some(cell) = LEARNED.get(usize::from(slot)) {
            // Set once: a later discovery of the same API finds the same plural.
            let _ = cell.set(learned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_gvk_values_parse_and_bad_ones_say_why() {
        let clone = ConfiguredKind::parse("kruise-cloneset").expect("preset");
        assert_eq!((clone.api_version, clone.kind, clone.plural), ("apps.kruise.io/v1alpha1", "CloneSet", "clonesets"));
        assert_eq!(clone.resource, "clonesets.apps.kruise.io");
        assert!(clone.named("clonesets", "cloneset") && clone.named("clonesets", "clonesets.apps.kruise.io"));
        assert!(!clone.named("clonesets", "clonesets.apps") && !clone.named("clonesets", "deployment"));
        assert_eq!(clone.template_pointer, "/spec/template");
        assert_eq!(clone.status, StatusRule::Replicas);
        let knative = ConfiguredKind::parse("knative-service").expect("preset");
        assert!(knative.named_revisions && knative.status == StatusRule::ReadyCondition);
        let custom = ConfiguredKind::parse("example.com/v1/Worker=spec.workload.podTemplate").expect("custom");
        assert_eq!((custom.group, custom.version, custom.kind), ("example.com", "v1", "Worker"));
        assert_eq!(custom.template_pointer, "/spec/workload/podTemplate");
        assert_eq!(custom.status, StatusRule::Untracked);
        assert_eq!(ConfiguredKind::parse("x.io/v1/Policy").expect("custom").plural, "policies");
        assert_eq!(ConfiguredKind::parse("x.io/v1/Gateway").expect("custom").plural, "gateways");
        assert_eq!(ConfiguredKind::parse("x.io/v1/Ingress").expect("custom").plural, "ingresses");
        for bad in ["CloneSet", "apps.kruise.io/CloneSet", "a/b/c", "a/b/Kind/x", ""] {
            assert_eq!(ConfiguredKind::parse(bad), Err(KindError::Syntax(bad.to_owned())), "{bad}");
        }
        assert_eq!(ConfiguredKind::parse("x.io/v1/W=template"), Err(KindError::Path("x.io/v1/W=template".into())));
        let podset = ConfiguredKind::parse("core.strimzi.io/v1beta2/StrimziPodSet=-").expect("template-less");
        assert!(!podset.has_template() && clone.has_template());
        assert_eq!(podset.plural, "strimzipodsets");
        assert_eq!(
            KindError::Syntax("x".into()).to_string(),
            "--workload-kind \"x\": expected <group>/<version>/<Kind>[=<path to the pod template>] or one of \
             knative-service, kruise-cloneset, kruise-statefulset, kruise-daemonset"
        );
    }

    #[test]
    fn built_in_kinds_and_repeats_are_refused() {
        // The kind table's answer for built-in kinds is tested with the table (`workload/kinds_tests.rs`).
        let built_in = |group: &str, kind: &str| (group, kind) == ("apps", "Deployment");
        let dup = |v: &[&str]| register(v.iter().map(|s| ConfiguredKind::parse(s).expect("kind")).collect(), built_in);
        assert!(matches!(dup(&["apps/v1/Deployment"]), Err(KindError::Duplicate(..))));
        assert!(matches!(dup(&["kruise-cloneset", "apps.kruise.io/v1beta1/CloneSet"]), Err(KindError::Duplicate(..))));
        let nine: Vec<String> = (0..9).map(|i| format!("x.io/v1/K{i}")).collect();
        let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
        assert_eq!(dup(&nine), Err(KindError::TooMany));
    }
}
