//! The kind table: the one place a [`WorkloadKind`] names the Rust type that reads and writes it. Everything about
//! a kind is answered by that type, as the kind's own file states it (implementing [`WorkloadObject`]): its facts
//! ([`KindFacts`]: API and kubectl names, when it is watched, whether its rollouts are tracked, whether it has a pod
//! template, whether its pods run to completion, which kind-only annotations apply), how it is decoded, where its
//! template is and how its rollout is judged, and how it is written ([`WriteStyle`]: `write` here). Code that needs
//! any of it asks [`WorkloadKind::facts`] (or [`WorkloadKind::from_kubectl_name`], [`is_built_in`]) or implements
//! [`KindVisitor`] and calls [`visit`], instead of a `match` of its own; the rules are given the facts.
//!
//! Adding a built-in kind is its file, its line in the list that declares [`WorkloadKind`] (in `rules/keys.rs`: the
//! variant and `WorkloadKind::ALL`, the identity the rules, the index and the queue key by) and its arm in [`visit`]
//! (the compiler asks for it);
//! `kinds_tests.rs` shows a kind stated in one test file (`Widget`) served by this machinery. Kinds added by
//! `--workload-kind` need none of that: each takes a slot of [`Configured`], whose facts come from its
//! registration. It sits above the kind files (which depend only on the files below them: `patch.rs`,
//! `rollout.rs`, `owed_jobs.rs`); the writer (`write.rs`), the pod restarts (`pods.rs`) and the lists (`list.rs`)
//! reach a kind only through it. `WorkloadKind`'s methods here are inherent methods of a type of the pure layer,
//! implemented above it: the rules never call them (they take [`KindFacts`] as an argument).

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    batch::v1::{CronJob, Job},
};
use kube::Client;

use super::{
    KindFacts, WorkloadKey, WorkloadKind, WorkloadObject,
    configured::Configured,
    cronjob,
    custom::{self, DeploymentConfig, Rollout},
    job,
    patch::{WorkloadWrite, WriteStyle, template_patch},
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

impl WorkloadKind {
    /// What the kind is and how the rules treat it, as its file states them ([`WorkloadObject::facts`]).
    pub fn facts(self) -> KindFacts {
        visit(self, FactsOf)
    }

    /// The kind `kubectl` names `name` (singular, lower case, short names included: `deploy`, `sts`…): a built-in
    /// kind first, then the configured ones in slot order.
    pub fn from_kubectl_name(name: &str) -> Option<Self> {
        Self::all().find(|&kind| visit(kind, Named(name)))
    }
}

/// Whether `group`'s `kind` is a built-in kind, by its type's API names (`--workload-kind` refuses those: they are
/// reloaded already).
pub fn is_built_in(group: &str, kind: &str) -> bool {
    WorkloadKind::ALL.into_iter().any(|k| visit(k, IsApiKind { group, kind }))
}

/// [`WorkloadKind::facts`].
struct FactsOf;

impl KindVisitor for FactsOf {
    type Output = KindFacts;
    fn visit<K: WorkloadObject>(self) -> KindFacts {
        K::facts()
    }
}

/// [`WorkloadKind::from_kubectl_name`]: whether `K` is the kind named.
struct Named<'a>(&'a str);

impl KindVisitor for Named<'_> {
    type Output = bool;
    fn visit<K: WorkloadObject>(self) -> bool {
        K::named(self.0)
    }
}

/// [`is_built_in`]: whether `K`'s type has this API group and kind.
struct IsApiKind<'a> {
    group: &'a str,
    kind: &'a str,
}

impl KindVisitor for IsApiKind<'_> {
    type Output = bool;
    fn visit<K: WorkloadObject>(self) -> bool {
        K::group(&()) == self.group && K::kind(&()) == self.kind
    }
}

/// Writes a reload into a `K` the way its kind is written ([`WorkloadObject::WRITE`]): one strategic merge patch of
/// its template, its kind's own write otherwise. Returns the workload's `metadata.generation` after the write when
/// its response says (`super::write`).
pub(super) async fn write<K: WorkloadObject>(
    client: &Client,
    key: &WorkloadKey,
    w: &WorkloadWrite<'_>,
) -> Result<Option<i64>, kube::Error> {
    match K::WRITE {
        WriteStyle::TemplatePatch => template_patch::<K>(client, key, w).await,
        WriteStyle::SpawnJob => cronjob::write(client, key, w).await.map(|()| None),
        WriteStyle::Recreate => job::write(client, key, w).await.map(|()| None),
        WriteStyle::MergePatch { restart_at } => custom::write::<K>(client, key, w, restart_at).await,
    }
}

#[cfg(test)]
#[path = "kinds_tests.rs"]
mod tests;
