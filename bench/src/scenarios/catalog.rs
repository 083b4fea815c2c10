//! Upstream's load-test scenarios with their sizes and update rates (reloader-behaviour.md §11.3), and M1.

use std::time::Duration;

use super::{
    ConfigDef, ConfigKind, Layout, NamedLists, Plan, RefHow, ScenarioId, WorkloadDef, cms, deployment, secrets,
};
use crate::measure::tracker::Kind;

const MS: fn(u64) -> Duration = Duration::from_millis;

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
                        keys_used: false,
                        named_lists: None,
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
        M2 => m2_layout(),
        M2N | M2R => {
            let mut l = m2_layout();
            l.id = id;
            let (lists, title) = if id == M2N {
                (NamedLists::Names, "M2 with every other workload selecting its resources by named lists of names")
            } else {
                (NamedLists::Patterns, "M2 with every other workload selecting its resources by regex named lists")
            };
            l.title = format!("{title} instead of auto");
            for w in l.workloads.iter_mut().step_by(2) {
                w.named_lists = Some(lists);
            }
            l
        }
        B1 => {
            let mut l = Layout::new(
                B1,
                "Restart budget: 1 Secret shared by 400 Deployments, rotated once",
                Plan::Count { count: 1, per_second: 1, targets: vec![0] },
            );
            l.configs = vec![ConfigDef { kind: ConfigKind::Secret, ns: 0, name: "shared".into(), pad_bytes: 0 }];
            l.workloads = (0..400).map(|i| deployment(0, format!("deploy-{i}"), vec![(0, RefHow::Volume)])).collect();
            l.settle_before = Duration::from_secs(5);
            l
        }
        M1K => {
            // Every 10th Deployment reads `value` of its ConfigMap through `valueFrom` and opts in to key-level
            // reloads (the updates change `value`, so the expected reloads are M1's).
            let mut l = m1_layout();
            l.id = M1K;
            l.title = "M1 with 100 of the 1,000 Deployments reading one key with reload-on: keys-used".into();
            for w in l.workloads.iter_mut().step_by(10) {
                w.keys_used = true;
                if let Some(first) = w.refs.first_mut() {
                    first.1 = RefHow::ValueFrom;
                }
            }
            l
        }
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
        l.configs.extend(secrets(ns, 200, 4096));
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

/// M2 (issue 15): 500 namespaces × (80 ConfigMaps + 80 Secrets of 1 KiB). Namespaces 0–99 hold 100 Deployments
/// each (Deployment j uses ConfigMap j % 79 and Secret j % 80 through `envFrom`, and ConfigMap 79, shared by all
/// 100, as a volume); namespaces 100–499 hold 5 StatefulSets each (StatefulSet j uses ConfigMap j and Secret j).
/// 2,000 updates at 100/s: every 100th is the shared ConfigMap of one of namespaces 0–19 (a fan-out to 100),
/// the others a ConfigMap used by exactly one StatefulSet — 3,980 reloads expected.
fn m2_layout() -> Layout {
    let mut l = Layout::new(
        ScenarioId::M2,
        "Scale: 40,000 CMs + 40,000 Secrets of 1 KiB, 10,000 Deployments + 2,000 StatefulSets in 500 namespaces; \
         2,000 updates incl. 20 fan-outs to 100",
        Plan::Count { count: 0, per_second: 100, targets: Vec::new() },
    );
    l.namespaces = 500;
    let mut bases = Vec::new();
    for ns in 0..500 {
        let base = l.configs.len();
        bases.push(base);
        l.configs.extend(cms(ns, 80, 1024));
        l.configs.extend(secrets(ns, 80, 1024));
        if ns < 100 {
            for j in 0..100 {
                let refs = vec![
                    (base + j % 79, RefHow::EnvFrom),
                    (base + 80 + j % 80, RefHow::EnvFrom),
                    (base + 79, RefHow::Volume),
                ];
                l.workloads.push(deployment(ns, format!("deploy-{j}"), refs));
            }
        } else {
            for j in 0..5 {
                let mut sts = deployment(
                    ns,
                    format!("sts-{j}"),
                    vec![(base + j, RefHow::EnvFrom), (base + 80 + j, RefHow::EnvFrom)],
                );
                sts.kind = Kind::StatefulSet;
                l.workloads.push(sts);
            }
        }
    }
    let mut single = 0;
    let targets = (0..2000)
        .map(|i| {
            if i % 100 == 0 {
                bases[i / 100] + 79
            } else {
                let target = bases[100 + single % 400] + (single / 400) % 5;
                single += 1;
                target
            }
        })
        .collect();
    l.plan = Plan::Count { count: 2000, per_second: 100, targets };
    l.settle_before = Duration::from_secs(10);
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::{QUICK, ScenarioId};

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
        assert_eq!(count(ScenarioId::M2), (500, 80_000, 12_000));
        let m2 = layout(ScenarioId::M2);
        let Plan::Count { targets, .. } = &m2.plan else { panic!("M2 counts its updates") };
        let users = |c: usize| m2.workloads.iter().filter(|w| w.refs.iter().any(|(i, _)| *i == c)).count();
        assert_eq!(targets.iter().map(|c| users(*c)).sum::<usize>(), 3_980, "20 fan-outs of 100 + 1,980 singles");
        let distinct: std::collections::HashSet<_> = targets.iter().collect();
        assert_eq!(distinct.len(), 2_000, "every update is to another resource");
        let s13 = layout(ScenarioId::S13);
        // Every S13 ConfigMap is used by exactly two Deployments: each update is two reloads.
        for c in 0..5 {
            assert_eq!(s13.workloads.iter().filter(|w| w.refs.iter().any(|(i, _)| *i == c)).count(), 2);
        }
        assert_eq!(layout(ScenarioId::S11).controller_args, vec!["--reload-strategy=annotations".to_owned()]);
    }
}
