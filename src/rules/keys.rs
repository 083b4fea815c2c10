//! The identities the rules and the index share, as plain values: which resource, which workload and of what
//! kind, and where its rollout stands; and what a kind is ([`KindFacts`]), stated by each kind's file in
//! `workload` and given to the rules that need it. They sit below every rule that names them (`gates`, `decision`,
//! `strategy`) and the modules that fill them (`workload`, `index`), so dependencies point one way.
//!
//! Pure: no client, no I/O.

use std::{fmt, sync::Arc};

use crate::rules::resource::ConfigKind;

/// Identity of a ConfigMap, Secret or SecretProviderClass.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    /// Kind.
    pub kind: ConfigKind,
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Declares [`WorkloadKind`] and [`WorkloadKind::ALL`] from one list, so a built-in kind named here is also watched
/// (a variant left out of `ALL` would be a kind nobody watches, with no compiler error to say so).
macro_rules! workload_kinds {
    ($($(#[$doc:meta])* $kind:ident,)*) => {
        /// Kinds of workloads: the identity the rules, the index and the work queue key by, named as its variant (a
        /// configured kind as its registration). What a kind is and how it is treated are its [`KindFacts`], which
        /// its file in `crate::workload` states and the kind table there answers (`WorkloadKind::facts`,
        /// implemented in `workload/kinds.rs`, above this layer: the rules never call it, they are given the facts).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum WorkloadKind {
            $($(#[$doc])* $kind,)*
            /// A kind added by `--workload-kind` (issue 29): its slot in [`crate::rules::configured_kinds::registered`].
            Configured(u8),
        }

        impl WorkloadKind {
            /// Every built-in kind, in the order they are watched.
            pub const ALL: [Self; [$(stringify!($kind)),*].len()] = [$(Self::$kind),*];
        }
    };
}

workload_kinds! {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// batch/v1 CronJob (a reload spawns a Job).
    CronJob,
    /// batch/v1 Job (a reload recreates it).
    Job,
    /// argoproj.io/v1alpha1 Rollout.
    Rollout,
    /// apps.openshift.io/v1 DeploymentConfig.
    DeploymentConfig,
}

impl WorkloadKind {
    /// Every kind: the built-in ones and those configured.
    pub fn all() -> impl Iterator<Item = Self> {
        let configured = (0..crate::rules::configured_kinds::registered().len()).filter_map(|i| u8::try_from(i).ok());
        Self::ALL.into_iter().chain(configured.map(Self::Configured))
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Configured(slot) => match crate::rules::configured_kinds::get(*slot) {
                Some(k) => f.write_str(k.kind),
                None => write!(f, "Configured({slot})"),
            },
            _ => fmt::Debug::fmt(self, f),
        }
    }
}

/// What a workload kind is and how the rules treat it, as plain data: its file in `crate::workload` states them
/// (`WorkloadObject::facts`; a configured kind's come from its registration), the kind table answers them
/// (`WorkloadKind::facts`), and the rules that need one take it as an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindFacts {
    /// Its API version (`apps/v1`).
    pub api_version: &'static str,
    /// Its API resource, as RBAC names it (`deployments.apps`).
    pub api_resource: &'static str,
    /// The names `reloader explain` takes for it, lower case, as `explain` looks them up: a plural's `s` is
    /// dropped first, so kubectl's short name `sts` is `st` here.
    pub names: &'static [&'static str],
    /// When it is watched.
    pub watched: Watched,
    /// Its status tells its rollouts (what `restart` needs): not where a reload starts a run instead (CronJobs,
    /// Jobs), nor for a configured kind without a status rule. The budget and the health gate go by each object's
    /// state (`RolloutState`): an `OnDelete` one, or one paused by a user, is untracked too.
    pub tracks_rollouts: bool,
    /// Its objects embed a pod template: every kind but a configured one given as `=-` (its pods are restarted
    /// instead, and its references read from them).
    pub has_pod_template: bool,
    /// Its pods run to completion (CronJobs, Jobs): a reload starts a new run (a spawned Job, a recreated Job),
    /// and restarting its pods (`evict-pods`, `delete-pods`) is not a reload.
    pub runs_to_completion: bool,
    /// `pause-period` applies (Deployments: `spec.paused`); on another kind it is reported and ignored.
    pub pause_period: bool,
    /// `cronjob-reload` applies (CronJobs: spawn a Job or patch the job template); on another kind it is reported
    /// and ignored.
    pub cronjob_reload: bool,
}

impl KindFacts {
    /// The facts most kinds share, for a kind's file to complete with its names (`..KindFacts::ROLLED_OUT`): always
    /// watched, its pod template rolled out by its own controller, whose status tells the rollout; no kind-only
    /// annotation applies.
    pub const ROLLED_OUT: Self = Self {
        api_version: "",
        api_resource: "",
        names: &[],
        watched: Watched::Always,
        tracks_rollouts: true,
        has_pod_template: true,
        runs_to_completion: false,
        pause_period: false,
        cronjob_reload: false,
    };

    /// Served by a CRD that may be absent (Argo Rollouts, OpenShift, configured kinds): an optional API, watched
    /// once discovery finds it, whose objects may not match this binary's types (each is decoded on its own, a bad
    /// one skipped).
    pub fn served_by_crd(&self) -> bool {
        matches!(self.watched, Watched::ArgoRollouts | Watched::OpenShift | Watched::Configured)
    }

    /// Its resource plural (`deployments`): [`Self::api_resource`] up to the group.
    pub fn plural(&self) -> &'static str {
        self.api_resource.split_once('.').map_or(self.api_resource, |(plural, _)| plural)
    }
}

/// When a workload kind is watched: the flag that decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    /// Always.
    Always,
    /// Unless `--ignored-workload-types` names `cronjobs`.
    UnlessCronJobsIgnored,
    /// Unless `--ignored-workload-types` names `jobs`.
    UnlessJobsIgnored,
    /// With `--is-argo-rollouts`, once its API is served.
    ArgoRollouts,
    /// Unless `--is-openshift` is false, once its API is served.
    OpenShift,
    /// Registered by `--workload-kind`, once its API is served.
    Configured,
}

/// Identity of a workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    /// Kind.
    pub kind: WorkloadKind,
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// A workload's rollout, as its status tells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RolloutState {
    /// A kind whose rollouts are not tracked (CronJob, Job: each run is new pods, not a rollout).
    #[default]
    Untracked,
    /// The controller of the kind has seen the current template and every replica runs it, available.
    Complete,
    /// Anything else: the template is not observed yet, or replicas are being replaced.
    InProgress,
    /// The kind's controller gave up on it: a Deployment whose `Progressing` condition says
    /// `ProgressDeadlineExceeded` (its `progressDeadlineSeconds` passed without progress). Other kinds have no
    /// such condition; their rollouts fail by `--rollout-timeout` (the controller's own clock).
    Failed,
}
