//! `reloader explain configmap/<name>` (`secret/<name>`, `secretproviderclass/<name>`): the other direction of
//! `explain` — the question asked before touching a shared ConfigMap or rotating a Secret (#16, user-demand.md
//! §1.32). Every workload of the namespace that would roll out if the resource's content changed, with the
//! controller's own reason and container, and those that use it but would not (ignored, excluded, not selected),
//! plus what the controller does not look at (kind not watched, namespace out of scope). With a new content
//! (`--from-file`, `--from-literal`), the keys it changes and whether it changes anything at all.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Verdict, keys_read, preview::ContentChange};
use crate::rules::{
    decision::{DecisionSettings, ReloadDecision},
    hash::ContentHash,
    resource::ConfigKind,
    strategy::ReloadStrategy,
};
use crate::{
    index::{ConfigFacts, ConfigKey, decide_pair},
    workload::{WorkloadKey, WorkloadKind, WorkloadSummary},
};

/// What the controller sees around one resource.
#[derive(Clone, Debug)]
pub struct Surroundings<'a> {
    /// The resource's facts, `None` when it does not exist (decisions then assume no `ignore`/`match`).
    pub facts: Option<ConfigFacts>,
    /// The namespace's workloads of the watched kinds.
    pub workloads: &'a [(WorkloadKey, WorkloadSummary)],
    /// Workload kinds the controller does not watch (`--ignored-workload-types`, optional kinds off).
    pub unwatched: &'a [WorkloadKind],
    /// Workload kinds the caller's credentials may not list here: the answer leaves them out.
    pub unreadable: &'a [WorkloadKind],
    /// Why the controller does not see the resource at all (kind not watched, labels not selected), if it does not.
    pub not_watched: Option<String>,
    /// Why changes in the namespace are not acted on, if they are not.
    pub namespace_inactive: Option<String>,
    /// What a proposed new content changes (`--from-file`, `--from-literal`).
    pub preview: Option<ContentChange>,
}

/// The answer for one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dependents {
    /// `ConfigMap`, `Secret` or `SecretProviderClass`.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Whether it exists.
    pub found: bool,
    /// Why the controller does not see it, if it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_watched: Option<String>,
    /// Why changes in the namespace are not acted on, if they are not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_inactive: Option<String>,
    /// The controller's `--reload-strategy`.
    pub strategy: &'static str,
    /// What the proposed content changes (key names only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_content: Option<ContentChange>,
    /// Workloads a change would roll out (if the namespace and kind are acted on), sorted by kind and name.
    pub would_roll: Vec<Verdict>,
    /// Workloads that use it or name it but would not roll out.
    pub would_not_roll: Vec<Verdict>,
    /// Workload kinds the controller does not watch.
    pub unwatched_kinds: Vec<String>,
    /// Workload kinds the caller may not list in the namespace (403): left out of the answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable_kinds: Vec<String>,
}

/// The reason given when a proposed content equals the current one.
pub const UNCHANGED: &str = "the new content equals the current one";

/// The explanation for one resource. Pure.
pub fn explain_dependents(
    config: &ConfigKey,
    around: &Surroundings<'_>,
    settings: DecisionSettings,
    strategy: ReloadStrategy,
) -> Dependents {
    let facts = around.facts.clone().unwrap_or_else(|| ConfigFacts::live(ContentHash::NONE, false, false));
    let unchanged = around.preview.as_ref().is_some_and(ContentChange::is_empty);
    let (mut would_roll, mut would_not_roll) = (Vec::new(), Vec::new());
    let mut workloads: Vec<&(WorkloadKey, WorkloadSummary)> = around.workloads.iter().collect();
    workloads.sort_by(|a, b| (a.0.kind, &a.0.name).cmp(&(b.0.kind, &b.0.name)));
    for (key, summary) in workloads {
        let used = summary.uses.iter().any(|u| u.kind == config.kind && u.name == config.name);
        let selection = summary.annotations.for_kind(config.kind);
        let named = selection.named.iter().any(|p| p.matches(&config.name))
            || selection.remote.iter().any(|e| e.names(&config.namespace, &config.name));
        let decision = decide_pair(&key.namespace, summary, config, &facts, settings);
        let rolls = matches!(decision, ReloadDecision::Reload { .. });
        let keys = keys_read(summary, config, settings);
        // Key-level: a proposed content that changes none of the keys it reads does not roll it.
        let untouched = match (&keys, &around.preview) {
            (Some(read), Some(change)) => !change.keys().any(|k| read.contains(k)),
            _ => false,
        };
        // A workload of another namespace (a cross-namespace reference) is named with its namespace.
        let shown = match *key.namespace == *config.namespace {
            true => key.name.clone(),
            false => format!("{}/{}", key.namespace, key.name),
        };
        let mut verdict = Verdict::new(key.kind, &shown, decision, keys);
        if rolls && unchanged {
            verdict = Verdict { reloads: false, reason: UNCHANGED.to_owned(), container: None, keys: None, ..verdict };
            would_not_roll.push(verdict);
        } else if rolls && untouched {
            let read = verdict.keys.take().unwrap_or_default().join(", ");
            let changed = around.preview.iter().flat_map(ContentChange::keys).cloned().collect::<Vec<_>>().join(", ");
            let reason = format!("the new content changes {changed}; it reads only {read}");
            would_not_roll.push(Verdict { reloads: false, reason, container: None, ..verdict });
        } else if rolls {
            would_roll.push(verdict);
        } else if used || named {
            would_not_roll.push(verdict);
        }
    }
    Dependents {
        kind: config.kind.to_string(),
        namespace: config.namespace.to_string(),
        name: config.name.clone(),
        found: around.facts.is_some(),
        not_watched: around.not_watched.clone(),
        namespace_inactive: around.namespace_inactive.clone(),
        strategy: match strategy {
            ReloadStrategy::EnvVars => "env-vars",
            ReloadStrategy::Annotations => "annotations",
        },
        new_content: around.preview.clone(),
        would_roll,
        would_not_roll,
        unwatched_kinds: around.unwatched.iter().map(ToString::to_string).collect(),
        unreadable_kinds: around.unreadable.iter().map(ToString::to_string).collect(),
    }
}

impl Dependents {
    /// The answer as lines for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = format!("{} {}/{}\n", self.kind, self.namespace, self.name);
        if !self.found {
            out.push_str("  not found: decisions below assume it has no ignore/match annotation\n");
        }
        if let Some(why) = &self.namespace_inactive {
            let _ = writeln!(out, "  namespace {}: {why}; a change rolls nothing", self.namespace);
        }
        if let Some(why) = &self.not_watched {
            let _ = writeln!(out, "  {why}: a change rolls nothing");
        }
        if let Some(change) = &self.new_content {
            let _ = writeln!(out, "  new content: {change}");
        }
        let active = self.namespace_inactive.is_none() && self.not_watched.is_none();
        let verb = if active { "would roll out" } else { "would roll out if it were watched" };
        let _ = writeln!(out, "  {verb} ({}), strategy {}:", self.would_roll.len(), self.strategy);
        for v in &self.would_roll {
            let container = v.container.as_deref().unwrap_or_default();
            let _ = writeln!(out, "    {} {}: {}; container {container}{}", v.kind, v.name, v.reason, v.keys_note());
        }
        let _ = writeln!(out, "  use it but would not roll out ({}):", self.would_not_roll.len());
        for v in &self.would_not_roll {
            let _ = writeln!(out, "    {} {}: {}", v.kind, v.name, v.reason);
        }
        for kind in &self.unwatched_kinds {
            let _ = writeln!(out, "  {kind}s are not watched: never rolled");
        }
        for kind in &self.unreadable_kinds {
            let _ =
                writeln!(out, "  {kind}s could not be listed with these credentials (forbidden): not in this answer");
        }
        out
    }
}

/// `ConfigMaps`, `Secrets`, `SecretProviderClasses`.
pub fn plural(kind: ConfigKind) -> &'static str {
    match kind {
        ConfigKind::ConfigMap => "ConfigMaps",
        ConfigKind::Secret => "Secrets",
        ConfigKind::SecretProviderClass => "SecretProviderClasses",
    }
}

#[cfg(test)]
#[path = "reverse_tests.rs"]
mod tests;
