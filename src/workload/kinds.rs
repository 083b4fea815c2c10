//! The kind table: the one place a [`WorkloadKind`] names the Rust type that reads and writes it. Code that needs a
//! kind's type — to watch, list, read or write it — implements [`KindVisitor`] and calls [`visit`], instead of a
//! `match` of its own. Adding a kind is its file (implementing [`WorkloadObject`]), its facts in
//! [`WorkloadKind`] (`keys.rs`: its names, API version and resource) and one line here. Kinds added by
//! `--workload-kind` need none of that: each takes a slot of [`Configured`].

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    batch::v1::{CronJob, Job},
};

use super::{
    WorkloadKind, WorkloadObject,
    configured::Configured,
    custom::{DeploymentConfig, Rollout},
};

/// Something done with a workload kind's type.
pub trait KindVisitor {
    /// What it gives.
    type Output;
    /// Does it with `K`.
    fn visit<K: WorkloadObject>(self) -> Self::Output;
}

/// Does `visitor` with the type of `kind`.
pub fn visit<V: KindVisitor>(kind: WorkloadKind, visitor: V) -> V::Output {
    match kind {
        WorkloadKind::Deployment => visitor.visit::<Deployment>(),
        WorkloadKind::StatefulSet => visitor.visit::<StatefulSet>(),
        WorkloadKind::DaemonSet => visitor.visit::<DaemonSet>(),
        WorkloadKind::CronJob => visitor.visit::<CronJob>(),
        WorkloadKind::Job => visitor.visit::<Job>(),
        WorkloadKind::Rollout => visitor.visit::<Rollout>(),
        WorkloadKind::DeploymentConfig => visitor.visit::<DeploymentConfig>(),
        WorkloadKind::Configured(0) => visitor.visit::<Configured<0>>(),
        WorkloadKind::Configured(1) => visitor.visit::<Configured<1>>(),
        WorkloadKind::Configured(2) => visitor.visit::<Configured<2>>(),
        WorkloadKind::Configured(3) => visitor.visit::<Configured<3>>(),
        WorkloadKind::Configured(4) => visitor.visit::<Configured<4>>(),
        WorkloadKind::Configured(5) => visitor.visit::<Configured<5>>(),
        WorkloadKind::Configured(6) => visitor.visit::<Configured<6>>(),
        // configured_kinds::MAX is 8: registration refuses more, so no slot beyond 7 exists.
        WorkloadKind::Configured(_) => visitor.visit::<Configured<7>>(),
    }
}

#[cfg(test)]
mod tests {
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
}
