//! The scenarios: upstream Reloader's load test S1–S13 (reloader-behaviour.md §11.3, same sizes and update
//! rates) and M1, a memory-scale scenario. A scenario is a [`Layout`] — resources, workloads and how they
//! reference each other — plus an update [`Plan`]; [`run`] plays it against one controller.

pub mod catalog;
pub mod driver;
pub mod objects;
pub mod run;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, measure::tracker::Kind};

/// A scenario name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScenarioId {
    S1,
    S2,
    S3,
    S4,
    S5,
    S6,
    S7,
    S8,
    S9,
    S10,
    S11,
    S12,
    S13,
    /// Memory scale: 10,000 ConfigMaps + 10,000 Secrets of 4 KiB, 1,000 Deployments, 50 namespaces.
    M1,
    /// M1 with 10% of the Deployments opted in to key-level reloads (not in `all`: it measures one feature).
    M1K,
    /// Scale (issue 15): 40,000 ConfigMaps + 40,000 Secrets of 1 KiB, 10,000 Deployments + 2,000 StatefulSets in
    /// 500 namespaces; 2,000 updates, 20 of them fan-outs to 100 Deployments (not in `all`: minutes to set up).
    M2,
    /// M2 with every other workload selecting its resources by a named list of anchored names instead of `auto`
    /// (issue 27: a plan of such a workload looks at its namespace's resources only; compare with M2).
    M2N,
    /// M2N with regular expressions in the named lists (`^cm-5(-v[0-9]+)?$`): matched, not looked up.
    M2R,
    /// Restart budget: one Secret shared by 400 Deployments, rotated once (not in `all`; compare
    /// `--max-concurrent-rollouts` against none, with rollouts).
    B1,
}

/// Every scenario, in run order (M1 last: it is the slowest and leaves the most for the API server to delete).
pub const ALL: [ScenarioId; 14] = {
    use ScenarioId::*;
    [S1, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, S12, S13, M1]
};

/// Upstream's `loadtest-quick`.
pub const QUICK: [ScenarioId; 3] = [ScenarioId::S1, ScenarioId::S4, ScenarioId::S6];

impl ScenarioId {
    /// Parses `S1`…`S13`, `M1`, `M1K`, `M2`, `M2N`, `M2R`, `B1` (any case).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let t = text.trim().to_ascii_uppercase();
        ALL.iter()
            .chain(&[Self::M1K, Self::M2, Self::M2N, Self::M2R, Self::B1])
            .copied()
            .find(|id| format!("{id:?}") == t)
            .ok_or_else(|| Error::Invalid(format!("scenario {text}")))
    }

    /// Parses a comma list, `all` or `quick`.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, Error> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" => Ok(ALL.to_vec()),
            "quick" => Ok(QUICK.to_vec()),
            _ => text.split(',').filter(|s| !s.trim().is_empty()).map(Self::parse).collect(),
        }
    }
}

/// ConfigMap or Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigKind {
    /// v1 ConfigMap.
    ConfigMap,
    /// v1 Secret.
    Secret,
}

/// A resource of the layout.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigDef {
    /// Its kind.
    pub kind: ConfigKind,
    /// Index of its namespace.
    pub ns: usize,
    /// Its name.
    pub name: String,
    /// Bytes of padding in its content (object size).
    pub pad_bytes: usize,
}

/// How a pod spec references a resource (all count as "used" for `auto`, reloader-behaviour.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefHow {
    /// `envFrom` of the main container.
    EnvFrom,
    /// One `env[].valueFrom` key reference in the main container.
    ValueFrom,
    /// A `configMap`/`secret` volume.
    Volume,
    /// A projected volume source.
    Projected,
    /// `envFrom` of an init container.
    InitEnvFrom,
}

/// A workload of the layout.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadDef {
    /// Its kind.
    pub kind: Kind,
    /// Index of its namespace.
    pub ns: usize,
    /// Its name.
    pub name: String,
    /// Resources it uses (index into the layout's configs) and how.
    pub refs: Vec<(usize, RefHow)>,
    /// `deployment.reloader.stakater.com/pause-period` on its metadata.
    pub pause_period: Option<String>,
    /// `reloader.stakater.com/reload-on: keys-used` on its metadata (key-level reloads; ours).
    pub keys_used: bool,
    /// Selects what it uses by named lists (`configmap.reloader.stakater.com/reload`, the same for Secrets) instead
    /// of `reloader.stakater.com/auto`.
    pub named_lists: Option<NamedLists>,
}

/// How a workload's named lists name what it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedLists {
    /// Anchored names, `^cm-5$,^cm-79$`: what most users write; the controller looks each name up.
    Names,
    /// Regular expressions, `^cm-5(-v[0-9]+)?$,…`: each changed resource of the namespace is matched against them.
    Patterns,
}

/// How updates are made during the scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// `tasks` loops, each updating a random resource of `targets` every `interval`; metadata-only
    /// (an annotation, data unchanged) when `annotation_only`.
    Random { interval: Duration, tasks: usize, targets: Vec<usize>, annotation_only: bool },
    /// One loop updating `targets` in turn every `interval`.
    RoundRobin { interval: Duration, targets: Vec<usize> },
    /// S5: a Deployment using `config` is created every `create_every` and the one created `keep` before is
    /// deleted; `config` is updated every `update_every`.
    Churn { create_every: Duration, keep: usize, update_every: Duration, config: usize },
    /// M1: exactly `count` updates over `targets` in turn, `per_second` per second (not bound by the duration).
    Count { count: usize, per_second: u32, targets: Vec<usize> },
}

/// A scenario's objects and updates.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Which scenario.
    pub id: ScenarioId,
    /// One line saying what it does.
    pub title: String,
    /// Number of fresh namespaces.
    pub namespaces: usize,
    /// Resources.
    pub configs: Vec<ConfigDef>,
    /// Workloads present from the start.
    pub workloads: Vec<WorkloadDef>,
    /// Updates.
    pub plan: Plan,
    /// Scenario flags for the controller (upstream flags only).
    pub controller_args: Vec<String>,
    /// Restart the controller a third of the way in (S6).
    pub restart: bool,
    /// Wait this long after the controller is ready before measuring (lets first-sight work finish).
    pub settle_before: Duration,
}

pub(crate) fn cms(ns: usize, count: usize, pad_bytes: usize) -> Vec<ConfigDef> {
    (0..count).map(|i| ConfigDef { kind: ConfigKind::ConfigMap, ns, name: format!("cm-{i}"), pad_bytes }).collect()
}

pub(crate) fn secrets(ns: usize, count: usize, pad_bytes: usize) -> Vec<ConfigDef> {
    (0..count).map(|i| ConfigDef { kind: ConfigKind::Secret, ns, name: format!("secret-{i}"), pad_bytes }).collect()
}

pub(crate) fn deployment(ns: usize, name: String, refs: Vec<(usize, RefHow)>) -> WorkloadDef {
    WorkloadDef { kind: Kind::Deployment, ns, name, refs, pause_period: None, keys_used: false, named_lists: None }
}

impl Layout {
    pub(crate) fn new(id: ScenarioId, title: &str, plan: Plan) -> Self {
        Self {
            id,
            title: title.into(),
            namespaces: 1,
            configs: Vec::new(),
            workloads: Vec::new(),
            plan,
            controller_args: Vec::new(),
            restart: false,
            settle_before: Duration::ZERO,
        }
    }

    /// `per_ns` ConfigMap + Deployment pairs in each of `namespaces` namespaces, Deployment i using ConfigMap i.
    pub fn pairs(id: ScenarioId, title: &str, namespaces: usize, per_ns: usize, pad_bytes: usize, plan: Plan) -> Self {
        let mut l = Self::new(id, title, plan);
        l.namespaces = namespaces;
        for ns in 0..namespaces {
            for c in cms(ns, per_ns, pad_bytes) {
                let idx = l.configs.len();
                l.workloads.push(deployment(ns, c.name.replace("cm-", "deploy-"), vec![(idx, RefHow::EnvFrom)]));
                l.configs.push(c);
            }
        }
        l
    }

    /// Every config index.
    pub fn all_configs(&self) -> Vec<usize> {
        (0..self.configs.len()).collect()
    }
}

pub use catalog::layout;
