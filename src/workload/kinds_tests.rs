//! Unit tests of the kind table: every kind reaches its own type, its facts agree with its type's API names, and
//! what the rules make of them per kind.

use super::*;

struct KindOf;
impl KindVisitor for KindOf {
    type Output = WorkloadKind;
    fn visit<K: WorkloadObject>(self) -> WorkloadKind {
        K::KIND
    }
}

#[test]
fn every_kind_maps_to_the_type_of_that_kind() {
    for kind in WorkloadKind::ALL.into_iter().chain((0..8).map(WorkloadKind::Configured)) {
        assert_eq!(visit(kind, KindOf), kind);
    }
}

#[test]
fn each_kind_gets_the_rollout_strategies_it_can_take() {
    use crate::rules::strategy::RolloutStrategy as S;
    use WorkloadKind::{CronJob, Deployment, Job, Rollout};
    for s in [S::Rollout, S::Restart, S::EvictPods, S::DeletePods] {
        assert_eq!(s.for_kind(&Deployment.facts()), s, "{s:?}");
        assert_eq!(s.for_kind(&Rollout.facts()), s, "{s:?}");
        assert_eq!(s.for_kind(&CronJob.facts()), S::Rollout, "{s:?}: CronJobs spawn a Job");
        assert_eq!(s.for_kind(&Job.facts()), S::Rollout, "{s:?}: Jobs are recreated");
    }
}

#[test]
fn the_built_in_kinds_are_known_by_their_types_api_names() {
    let built_in = [
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("batch", "CronJob"),
        ("batch", "Job"),
        ("argoproj.io", "Rollout"),
        ("apps.openshift.io", "DeploymentConfig"),
    ];
    for (group, kind) in built_in {
        assert!(is_built_in(group, kind), "{group} {kind}");
    }
    for (group, kind) in [("apps.kruise.io", "StatefulSet"), ("apps.kruise.io", "CloneSet"), ("apps", "ReplicaSet")] {
        assert!(!is_built_in(group, kind), "{group} {kind}");
    }
}

#[test]
fn each_kinds_facts_name_the_api_its_type_is_served_by() {
    struct Api;
    impl KindVisitor for Api {
        type Output = (String, String);
        fn visit<K: WorkloadObject>(self) -> Self::Output {
            (K::api_version(&()).into_owned(), format!("{}.{}", K::plural(&()), K::group(&())))
        }
    }
    for kind in WorkloadKind::ALL {
        let facts = kind.facts();
        let (api_version, api_resource) = visit(kind, Api);
        assert_eq!((facts.api_version, facts.api_resource), (api_version.as_str(), api_resource.as_str()), "{kind}");
    }
}
