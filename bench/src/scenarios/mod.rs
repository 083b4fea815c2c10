//! The scenarios: upstream Reloader's load test S1–S13 (reloader-behaviour.md §11.3, same sizes and update
//! rates) and M1, a memory-scale scenario. A scenario is a [`Layout`] — resources, workloads and how they
//! reference each other — plus an update [`Plan`]; [`run`] plays it against one controller.

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
}

/// Every scenario, in run order (M1 last: it is the slowest and leaves the most for the API server to delete).
pub const ALL: [ScenarioId; 14] = {
    use ScenarioId::*;
    [S1, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, S12, S13, M1]
};

/// Upstream's `loadtest-quick`.
pub const QUICK: [ScenarioId; 3] = [ScenarioId::S1, ScenarioId::S4, ScenarioId::S6];

impl ScenarioId {
    /// Parses `S1`…`S13`, `M1` (any case).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let t = text.trim().to_ascii_uppercase();
        ALL.iter().copied().find(|id| format!("{id:?}") == t).ok_or_else(|| Error::Invalid(format!("scenario {text}")))
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

const MS: fn(u64) -> Duration = Duration::from_millis;

fn cms(ns: usize, count: usize, pad_bytes: usize) -> Vec<ConfigDef> {
    (0..count).map(|i| ConfigDef { kind: ConfigKind::ConfigMap, ns, name: format!("cm-{i}"), pad_bytes }).collect()
}

fn deployment(ns: usize, name: String, refs: Vec<(usize, RefHow)>) -> WorkloadDef {
    WorkloadDef { kind: Kind::Deployment, ns, name, refs, pause_period: None }
}

impl Layout {
    fn new(id: ScenarioId, title: &str, plan: Plan) -> Self {
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

fn random(interval: u64, tasks: usize, n: usize) -> Plan {
    Plan::Random { interval: MS(interval), tasks, targets: (0..n).collect(), annotation_only: false }
}

/// The layout of a scenario (upstream's sizes and rates).
pub fn layout(id: ScenarioId) -> Layout {
    use ScenarioId::*;
    match id {
        S1 => Layout::pairs(
            S1,
            "Burst: 10 CMs / 10 Deployments, a random CM updated every 100 ms",
            1,
            10,
            0,
            random(100, 1, 10),
        ),
        S2 => {
            let mut l =
                Layout::new(S2, "Fan-out: 1 CM shared by 50 Deployments, updated every 5 s", random(5000, 1, 1));
            l.configs = cms(0, 1, 0);
            l.workloads = (0..50).map(|i| deployment(0, format!("deploy-{i}"), vec![(0, RefHow::EnvFrom)])).collect();
            l
        }
        S3 => Layout::pairs(
            S3,
            "High cardinality: 11 namespaces × 20 CM/Deployment pairs, a random CM every 200 ms",
            11,
            20,
            0,
            random(200, 1, 220),
        ),
        S4 => {
            let mut l = Layout::pairs(
                S4,
                "No-op: annotation-only CM updates every 100 ms (0 reloads expected)",
                1,
                10,
                0,
                random(100, 1, 10),
            );
            l.plan = Plan::Random { interval: MS(100), tasks: 1, targets: l.all_configs(), annotation_only: true };
            l
        }
        S5 => {
            let plan = Plan::Churn { create_every: MS(500), keep: 10, update_every: MS(2000), config: 0 };
            let mut l = Layout::new(
                S5,
                "Churn: a Deployment created every 500 ms, the 10th-newest deleted; churn-cm updated every 2 s",
                plan,
            );
            l.configs = vec![ConfigDef { kind: ConfigKind::ConfigMap, ns: 0, name: "churn-cm".into(), pad_bytes: 0 }];
            l
        }
        S6 => {
            let mut l = Layout::pairs(
                S6,
                "Controller restart: 20 pairs, updates every 200 ms, controller killed at 1/3 and restarted",
                1,
                20,
                0,
                random(200, 1, 20),
            );
            l.restart = true;
            l
        }
        S7 => Layout::pairs(
            S7,
            "API pressure: 50 pairs, 10 tasks each updating a random CM every 100 ms",
            1,
            50,
            0,
            random(100, 10, 50),
        ),
        S8 => Layout::pairs(
            S8,
            "Large objects: 10 CMs of ~100 KB with a Deployment each, an update every 2 s",
            1,
            10,
            100 * 1024,
            random(2000, 1, 10),
        ),
        S9 => {
            let mut l = Layout::new(
                S9,
                "Multi-workload: 1 CM shared by 5 Deployments, 3 StatefulSets, 2 DaemonSets, updated every 5 s",
                random(5000, 1, 1),
            );
            l.configs = cms(0, 1, 0);
            let kinds = [(Kind::Deployment, "deploy", 5), (Kind::StatefulSet, "sts", 3), (Kind::DaemonSet, "ds", 2)];
            for (kind, stem, n) in kinds {
                for i in 0..n {
                    l.workloads.push(WorkloadDef {
                        kind,
                        ns: 0,
                        name: format!("{stem}-{i}"),
                        refs: vec![(0, RefHow::EnvFrom)],
                        pause_period: None,
                    });
                }
            }
            l
        }
        S10 => {
            let mut l = Layout::new(
                S10,
                "Secrets and mixed: 5 Secrets + 5 CMs; 5 secret-only, 3 cm-only, 2 mixed Deployments; an update every 500 ms",
                random(500, 1, 10),
            );
            l.configs = cms(0, 5, 0);
            l.configs.extend((0..5).map(|i| ConfigDef {
                kind: ConfigKind::Secret,
                ns: 0,
                name: format!("secret-{i}"),
                pad_bytes: 0,
            }));
            for i in 0..5 {
                l.workloads.push(deployment(0, format!("secret-only-{i}"), vec![(5 + i, RefHow::EnvFrom)]));
            }
            for i in 0..3 {
                l.workloads.push(deployment(0, format!("cm-only-{i}"), vec![(i, RefHow::EnvFrom)]));
            }
            for i in 0..2 {
                l.workloads.push(deployment(
                    0,
                    format!("mixed-{i}"),
                    vec![(3 + i, RefHow::EnvFrom), (5 + i, RefHow::Volume)],
                ));
            }
            l
        }
        S11 => {
            let mut l = Layout::pairs(
                S11,
                "Annotation strategy (--reload-strategy=annotations): 10 pairs, an update every 500 ms",
                1,
                10,
                0,
                random(500, 1, 10),
            );
            l.controller_args = vec!["--reload-strategy=annotations".into()];
            l
        }
        S12 => {
            let mut l = Layout::pairs(
                S12,
                "Pause: 10 pairs with pause-period 15s, an update every 2 s",
                1,
                10,
                0,
                random(2000, 1, 10),
            );
            for w in &mut l.workloads {
                w.pause_period = Some("15s".into());
            }
            l
        }
        S13 => {
            let mut l = Layout::new(
                S13,
                "Complex references: 5 CMs, 5 Deployments each using a primary and a secondary CM through init containers, valueFrom, volumes and projected volumes; an update every 2 s",
                random(2000, 1, 5),
            );
            l.configs = cms(0, 5, 0);
            let hows = [
                (RefHow::InitEnvFrom, RefHow::Projected),
                (RefHow::ValueFrom, RefHow::Volume),
                (RefHow::Volume, RefHow::Projected),
                (RefHow::Projected, RefHow::ValueFrom),
                (RefHow::InitEnvFrom, RefHow::Volume),
            ];
            for (i, (primary, secondary)) in hows.into_iter().enumerate() {
                l.workloads.push(deployment(0, format!("deploy-{i}"), vec![(i, primary), ((i + 1) % 5, secondary)]));
            }
            l
        }
        M1 => m1_layout(),
    }
}

/// M1: 50 namespaces × (200 ConfigMaps + 200 Secrets of 4 KiB, 20 Deployments using ConfigMap j and Secret j);
/// 1,000 updates of the used ConfigMaps at 100/s after the controller has synced.
fn m1_layout() -> Layout {
    let mut l = Layout::new(
        ScenarioId::M1,
        "Memory scale: 10,000 CMs + 10,000 Secrets of 4 KiB, 1,000 auto Deployments in 50 namespaces; 1,000 updates",
        Plan::Count { count: 0, per_second: 100, targets: Vec::new() },
    );
    l.namespaces = 50;
    let mut targets = Vec::new();
    for ns in 0..50 {
        let base = l.configs.len();
        l.configs.extend(cms(ns, 200, 4096));
        l.configs.extend((0..200).map(|i| ConfigDef {
            kind: ConfigKind::Secret,
            ns,
            name: format!("secret-{i}"),
            pad_bytes: 4096,
        }));
        for j in 0..20 {
            let refs = vec![(base + j, RefHow::EnvFrom), (base + 200 + j, RefHow::EnvFrom)];
            l.workloads.push(deployment(ns, format!("deploy-{j}"), refs));
            targets.push(base + j);
        }
    }
    l.plan = Plan::Count { count: 1000, per_second: 100, targets };
    l.settle_before = Duration::from_secs(5);
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_lists_parse() {
        assert_eq!(ScenarioId::parse_list("quick").ok(), Some(QUICK.to_vec()));
        assert_eq!(ScenarioId::parse_list("all").map(|v| v.len()).ok(), Some(14));
        assert_eq!(
            ScenarioId::parse_list("s1, S13,m1").ok(),
            Some(vec![ScenarioId::S1, ScenarioId::S13, ScenarioId::M1])
        );
        assert!(ScenarioId::parse_list("S14").is_err());
    }

    #[test]
    fn layouts_have_upstream_sizes() {
        let count = |id| {
            let l = layout(id);
            (l.namespaces, l.configs.len(), l.workloads.len())
        };
        assert_eq!(count(ScenarioId::S1), (1, 10, 10));
        assert_eq!(count(ScenarioId::S2), (1, 1, 50));
        assert_eq!(count(ScenarioId::S3), (11, 220, 220));
        assert_eq!(count(ScenarioId::S7), (1, 50, 50));
        assert_eq!(count(ScenarioId::S9), (1, 1, 10));
        assert_eq!(count(ScenarioId::S10), (1, 10, 10));
        assert_eq!(count(ScenarioId::S13), (1, 5, 5));
        assert_eq!(count(ScenarioId::M1), (50, 20_000, 1_000));
        let s13 = layout(ScenarioId::S13);
        // Every S13 ConfigMap is used by exactly two Deployments: each update is two reloads.
        for c in 0..5 {
            assert_eq!(s13.workloads.iter().filter(|w| w.refs.iter().any(|(i, _)| *i == c)).count(), 2);
        }
        assert_eq!(layout(ScenarioId::S11).controller_args, vec!["--reload-strategy=annotations".to_owned()]);
    }
}
