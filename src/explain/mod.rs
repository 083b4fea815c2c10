//! `reloader explain`, both directions, with the controller's own decisions ([`decide_pair`]) and first-sight
//! rules (the [`Index`] with the baseline a (re)started controller uses), so its answers are the controller's.
//!
//! - `explain <kind>/<name>`: which ConfigMaps and Secrets reload one workload and why, and whether the controller
//!   would roll it out right now ("what would restart?", user-demand.md §1.32; "would a controller restart roll
//!   this?", §1.3).
//! - `explain configmap/<name>` (`secret/…`, `secretproviderclass/…`): [`reverse`], every workload a change
//!   would roll out; with `--from-file`/`--from-literal`, for a concrete new content ([`preview`]).
//!
//! Reads only ([`read`]); answers as text for a terminal or JSON for scripts (`-o json`). Prints resource names,
//! key names, hashes and annotation values, never Secret data.

use std::fmt::Write as _;

use serde::Serialize;

use crate::rules::{
    decision::{DecisionSettings, ReloadDecision},
    hash::ContentHash,
    resource::ConfigKind,
    strategy::ReloadStrategy,
};
use crate::{
    index::{Baseline, ConfigFacts, ConfigKey, Index, decide_pair},
    workload::{WorkloadKey, WorkloadKind, WorkloadSummary},
};

pub mod cli;
mod discover;
pub mod preview;
pub mod read;
pub mod reverse;

/// Why `explain` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The argument is not `<kind>/<name>` with a known kind.
    #[error(
        "{0:?} is not <kind>/<name>; kinds: deployment, statefulset, daemonset, cronjob, job, rollout, deploymentconfig, configmap, secret, secretproviderclass, or a workload kind the cluster serves (cloneset, …)"
    )]
    Target(String),
    /// Reading from the cluster failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
}

/// What `explain` was asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A workload: which resources reload it.
    Workload(WorkloadKind, String),
    /// A resource: which workloads its change would roll out.
    Config(ConfigKind, String),
}

/// Parses `deployment/web`, `configmap/cfg`, `secret/db`, `secretproviderclass/vault` (kind names as kubectl spells
/// them, short names and plurals included).
pub fn parse_target(text: &str) -> Result<Target, ExplainError> {
    let bad = || ExplainError::Target(text.to_owned());
    let (kind, name) = text.split_once('/').filter(|(_, n)| !n.is_empty()).ok_or_else(bad)?;
    let kind = kind.to_ascii_lowercase();
    let workload = |kind| Ok(Target::Workload(kind, name.to_owned()));
    let config = |kind| Ok(Target::Config(kind, name.to_owned()));
    // Plurals as kubectl takes them: `deployments`, `secretproviderclasses`.
    let singular = match kind.strip_suffix("es") {
        Some(k) if k.ends_with("class") => k,
        _ if kind.ends_with("class") => &kind,
        _ => kind.trim_end_matches('s'),
    };
    if let Some(kind) = WorkloadKind::from_kubectl_name(singular) {
        return workload(kind);
    }
    match singular {
        "configmap" | "cm" => config(ConfigKind::ConfigMap),
        "secret" => config(ConfigKind::Secret),
        "secretproviderclass" | "spc" => config(ConfigKind::SecretProviderClass),
        _ => Err(bad()),
    }
}

pub use crate::config::OutputFormat;

/// A resource or workload and the controller's verdict on the pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// `Deployment`, `ConfigMap`, ….
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Whether a change of the resource rolls the workload out.
    pub reloads: bool,
    /// The controller's reason, as its logs say it.
    pub reason: String,
    /// The container whose environment carries the reload (env-vars strategy), when it reloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Key-level reloads: the only keys whose change rolls it (those its pod spec reads), when it opted in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
}

impl Verdict {
    fn new(kind: impl ToString, name: &str, decision: ReloadDecision, keys: Option<Vec<String>>) -> Self {
        let (kind, name) = (kind.to_string(), name.to_owned());
        match decision {
            ReloadDecision::Reload { container, reason } => {
                Self { kind, name, reloads: true, reason: reason.to_string(), container: Some(container), keys }
            }
            ReloadDecision::Skip(reason) => {
                Self { kind, name, reloads: false, reason: reason.to_string(), container: None, keys: None }
            }
        }
    }

    /// `; only keys a, b` for a key-level reader, else nothing.
    fn keys_note(&self) -> String {
        self.keys.as_ref().map(|k| format!("; only keys {}", k.join(", "))).unwrap_or_default()
    }
}

/// The keys of `config` whose change rolls the workload, when it opted in to key-level reloads and reads only
/// some (`None`: any change does).
pub fn keys_read(summary: &WorkloadSummary, config: &ConfigKey, settings: DecisionSettings) -> Option<Vec<String>> {
    if !summary.annotations.keys_used.unwrap_or(settings.keys_used) {
        return None;
    }
    let used = summary.uses.iter().find(|u| u.kind == config.kind && u.name == config.name)?;
    used.keys.as_ref().map(|k| k.to_vec())
}

/// A rollout a controller starting now would make.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingRollout {
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The hash the workload records, `None` when it records none.
    pub recorded: Option<String>,
    /// The value the rollout would write.
    pub content: String,
}

/// The answer for one workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadExplanation {
    /// The workload's kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Why changes in the namespace are not acted on, if they are not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_inactive: Option<String>,
    /// Annotation problems (bad regex, bad duration, …).
    pub problems: Vec<String>,
    /// Resource kinds the controller does not watch (`--resources-to-ignore`).
    pub unwatched_kinds: Vec<String>,
    /// Every resource of the namespace that reloads it, and those it uses that do not, sorted by kind and name.
    pub resources: Vec<Verdict>,
    /// Resources the pod spec uses that do not exist.
    pub missing: Vec<String>,
    /// What a controller starting now would roll out for (empty: up to date); absent when the namespace is not
    /// acted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<Vec<PendingRollout>>,
    /// Why those rollouts would wait, and until when (a rollout gate, or the restart budget).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<String>,
}

/// What the controller sees of one workload's namespace.
#[derive(Clone, Debug)]
pub struct Visible<'a> {
    /// Why changes in the namespace are not acted on, if they are not (scope, ignore list, selector).
    pub namespace_inactive: Option<String>,
    /// The namespace's ConfigMaps and Secrets of the watched kinds.
    pub configs: &'a [(ConfigKey, ConfigFacts)],
    /// The watched kinds (`--resources-to-ignore` removes one).
    pub watched: &'a [ConfigKind],
    /// What a controller starting now assumes a workload without a record runs with (`--sync-after-restart`:
    /// nothing, so it rolls).
    pub start: Baseline,
    /// `--hash-key-secret`'s key: Secret values on templates are keyed by it.
    pub hash_key: Option<&'a crate::hash_key::HashKey>,
    /// Key-level reloads: views of the resources the workload reads some keys of, with their whole hash.
    pub views: &'a [(ConfigKey, ContentHash, Vec<crate::index::KeyView>)],
    /// What the rollout gates read.
    pub gates: GateFacts<'a>,
}

/// What the rollout gates (issue 17) read besides the workload: the other workloads of its namespace (empty
/// when it has no gate annotation and `--halt-on-failed-rollout` is off), the flags, and the time.
#[derive(Clone, Debug)]
pub struct GateFacts<'a> {
    /// The namespace's workloads.
    pub peers: &'a [(WorkloadKey, WorkloadSummary)],
    /// `--halt-on-failed-rollout`.
    pub halt_default: bool,
    /// `--max-concurrent-rollouts` (0: none).
    pub budget: usize,
    /// Now.
    pub now: jiff::Timestamp,
}

/// The explanation of one workload, given its summary and what the controller sees of its namespace. Pure.
pub fn explain(
    key: &WorkloadKey,
    summary: &WorkloadSummary,
    visible: &Visible<'_>,
    settings: DecisionSettings,
    strategy: ReloadStrategy,
) -> WorkloadExplanation {
    let &Visible { ref namespace_inactive, configs, watched, start, hash_key, views, ref gates } = visible;
    let mut sorted: Vec<&(ConfigKey, ConfigFacts)> = configs.iter().collect();
    sorted.sort_by(|a, b| (a.0.kind, &a.0.name).cmp(&(b.0.kind, &b.0.name)));
    let mut resources = Vec::new();
    for (config, facts) in sorted {
        let own = config.namespace == key.namespace;
        let used = own && summary.uses.iter().any(|u| u.kind == config.kind && u.name == config.name);
        let keys = keys_read(summary, config, settings);
        // A resource of another namespace (a cross-namespace reference) is named as the workload's records name it.
        let shown = crate::index::pair_of(&key.namespace, config).1;
        let decision = decide_pair(&key.namespace, summary, config, facts, settings);
        let verdict = Verdict::new(config.kind, &shown, decision, keys);
        // One of another namespace is there because an entry names it: shown, whatever the verdict.
        if verdict.reloads || used || !own {
            resources.push(verdict);
        }
    }
    if !settings.cross_namespace {
        // Without the flag such entries are neither read nor indexed (issue 38): each is refused, as named.
        let remote = summary.annotations.remote().filter(|(_, e)| *e.namespace != *key.namespace);
        let refused = || ReloadDecision::Skip(crate::rules::decision::SkipReason::CrossNamespaceRefused);
        resources.extend(remote.map(|(kind, e)| Verdict::new(kind, &e.to_string(), refused(), None)));
    }
    let missing = summary.uses.iter().filter(|used| {
        let found = |(c, _): &&(ConfigKey, ConfigFacts)| c.namespace == key.namespace && c.kind == used.kind;
        watched.contains(&used.kind) && !configs.iter().filter(found).any(|(c, _)| c.name == used.name)
    });
    let now = namespace_inactive.is_none().then(|| {
        let mut index = Index::default();
        index.set_hash_key(hash_key.cloned());
        index.set_cross_namespace(settings.cross_namespace);
        index.set_key_level(std::sync::Arc::default(), settings.keys_used);
        for (config, facts) in configs {
            index.upsert_config(config.clone(), facts.clone(), start);
        }
        index.set_namespace_rules(&key.namespace, settings.namespace);
        index.upsert_workload(key.clone(), summary.clone(), start);
        for (config, content, known) in views {
            index.set_views(config, *content, known.clone());
        }
        for (peer, peer_summary) in gates.peers.iter().filter(|(k, _)| k != key) {
            index.upsert_workload(peer.clone(), peer_summary.clone(), start);
        }
        let plan = index.plan(key, settings, strategy);
        let pending = plan.reloads.iter().map(|r| PendingRollout {
            kind: r.config.kind.to_string(),
            name: r.config.name.clone(),
            recorded: (r.previous != ContentHash::NONE).then(|| r.previous.to_string()),
            content: r.value.to_string(),
        });
        let changes = index.gate_changes(key, &plan.reloads, settings, |_| false);
        let wait = crate::rules::gates::gate(&summary.annotations.gates, gates.halt_default, &changes, gates.now);
        let waits = match wait {
            _ if plan.reloads.is_empty() => None,
            _ if crate::workload::spawns_nothing(&key.kind.facts(), &summary.pause, summary.cronjob_reload) => Some(
                "the CronJob is suspended: the change is recorded and no Job is spawned (its next run after it \
                 is resumed uses its template as it is)"
                    .to_owned(),
            ),
            Some(wait) => Some(wait.to_string()),
            // As the controller asks the budget: a write that starts a rollout, or pods restarted.
            None if gates.budget > 0
                && (summary.rollout != crate::workload::RolloutState::Untracked
                    || summary.rollout_strategy.is_some_and(|s| s.restarts_pods())) =>
            {
                Some(format!(
                    "at most {} rollouts run at once (--max-concurrent-rollouts): it may wait for a slot",
                    gates.budget
                ))
            }
            None => None,
        };
        (pending.collect(), waits)
    });
    let (now, waits) = match now {
        Some((pending, waits)) => (Some(pending), waits),
        None => (None, None),
    };
    WorkloadExplanation {
        kind: key.kind.to_string(),
        namespace: key.namespace.to_string(),
        name: key.name.clone(),
        namespace_inactive: namespace_inactive.clone(),
        problems: summary.annotations.problems.iter().map(|p| p.message.clone()).collect(),
        unwatched_kinds: [ConfigKind::ConfigMap, ConfigKind::Secret]
            .into_iter()
            .filter(|k| !watched.contains(k))
            .map(|k| k.to_string())
            .collect(),
        resources,
        missing: missing.map(|u| format!("{} {}", u.kind, u.name)).collect(),
        now,
        waits,
    }
}

impl WorkloadExplanation {
    /// The answer as lines for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = format!("{} {}/{}\n", self.kind, self.namespace, self.name);
        if let Some(why) = &self.namespace_inactive {
            let _ = writeln!(out, "  namespace {}: {why}; no change in it reloads anything", self.namespace);
        }
        for problem in &self.problems {
            let _ = writeln!(out, "  problem: {problem}");
        }
        for kind in &self.unwatched_kinds {
            let _ = writeln!(out, "  {kind}s are not watched (--resources-to-ignore): they never reload it");
        }
        for v in &self.resources {
            match &v.container {
                Some(container) if v.reloads => {
                    let keys = v.keys_note();
                    let _ = writeln!(
                        out,
                        "  {} {}: reloads on change ({}; container {container}{keys})",
                        v.kind, v.name, v.reason
                    );
                }
                _ => {
                    let _ = writeln!(out, "  {} {}: does not reload ({})", v.kind, v.name, v.reason);
                }
            }
        }
        for missing in &self.missing {
            let _ = writeln!(out, "  {missing}: used by the pod spec but not found");
        }
        match self.now.as_deref() {
            None => {}
            Some([]) => out.push_str("  now: up to date; a controller starting now would not roll it out\n"),
            Some(pending) => {
                for r in pending {
                    let recorded = r.recorded.as_deref().unwrap_or("no hash");
                    let _ = writeln!(
                        out,
                        "  now: would roll out for {} {}: the workload records {recorded}, the content is {}",
                        r.kind, r.name, r.content
                    );
                }
            }
        }
        if let Some(waits) = &self.waits {
            let _ = writeln!(out, "  waits: {waits}");
        }
        out
    }
}

/// Prints an answer as `-o` asks.
pub fn render<T: Serialize>(answer: &T, text: impl FnOnce(&T) -> String, format: OutputFormat) -> String {
    match format {
        OutputFormat::Text => text(answer),
        // Plain data (strings, bools, lists): serialising cannot fail.
        OutputFormat::Json => serde_json::to_string_pretty(answer).map(|j| j + "\n").unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
