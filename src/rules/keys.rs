//! The identities the rules and the index share, as plain values: which resource, which workload and of what
//! kind, and where its rollout stands. They sit below every rule that names them (`gates`, `decision`) and the
//! modules that fill them (`workload`, `index`), so dependencies point one way.
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

/// Kinds of workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
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
    /// A kind added by `--workload-kind` (issue 29): its slot in [`crate::rules::configured_kinds::registered`].
    Configured(u8),
}

impl WorkloadKind {
    /// Every kind.
    pub const ALL: [Self; 7] = [
        Self::Deployment,
        Self::StatefulSet,
        Self::DaemonSet,
        Self::CronJob,
        Self::Job,
        Self::Rollout,
        Self::DeploymentConfig,
    ];

    /// Every kind: the built-in ones and those configured.
    pub fn all() -> impl Iterator<Item = Self> {
        let configured = (0..crate::rules::configured_kinds::registered().len()).filter_map(|i| u8::try_from(i).ok());
        Self::ALL.into_iter().chain(configured.map(Self::Configured))
    }

    /// The kind's API version.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::Configured(slot) => crate::rules::configured_kinds::get(slot).map_or("", |k| k.api_version),
            Self::Deployment | Self::StatefulSet | Self::DaemonSet => "apps/v1",
            Self::CronJob | Self::Job => "batch/v1",
            Self::Rollout => "argoproj.io/v1alpha1",
            Self::DeploymentConfig => "apps.openshift.io/v1",
        }
    }

    /// Whether the kind has a status that tells its rollouts (what `restart` needs): every kind but CronJobs and
    /// Jobs (a run is new pods, not a rollout) and configured kinds without a status rule. The budget and the
    /// health gate go by each object's state (`RolloutState`): an `OnDelete` one, or one paused by a user, is
    /// untracked too.
    pub fn tracks_rollouts(self) -> bool {
        match self {
            Self::CronJob | Self::Job => false,
            Self::Configured(slot) => crate::rules::configured_kinds::get(slot)
                .is_some_and(|k| k.status != crate::rules::configured_kinds::StatusRule::Untracked),
            _ => true,
        }
    }

    /// Its objects embed a pod template: every kind but a configured one given as `=-` (its pods are restarted
    /// instead, and its references read from them).
    pub fn has_pod_template(self) -> bool {
        match self {
            Self::Configured(slot) => crate::rules::configured_kinds::get(slot).is_none_or(|k| k.has_template()),
            _ => true,
        }
    }

    /// The kind `kubectl` names `name` (singular, lower case, short names included: `deploy`, `sts`…).
    pub fn from_kubectl_name(name: &str) -> Option<Self> {
        Some(match name {
            "deployment" | "deploy" => Self::Deployment,
            "statefulset" | "st" => Self::StatefulSet,
            "daemonset" | "d" => Self::DaemonSet,
            "cronjob" | "cj" => Self::CronJob,
            "job" => Self::Job,
            "rollout" | "ro" => Self::Rollout,
            "deploymentconfig" | "dc" => Self::DeploymentConfig,
            _ => return crate::rules::configured_kinds::slot_named(name).map(Self::Configured),
        })
    }

    /// Served by a CRD that may be absent (Argo Rollouts, OpenShift): an optional API, whose objects may not
    /// match this binary's types (each is decoded on its own, a bad one skipped).
    pub fn served_by_crd(self) -> bool {
        matches!(self, Self::Rollout | Self::DeploymentConfig | Self::Configured(_))
    }

    /// The API resource, as RBAC names it (`deployments.apps`).
    pub fn api_resource(self) -> &'static str {
        match self {
            Self::Deployment => "deployments.apps",
            Self::StatefulSet => "statefulsets.apps",
            Self::DaemonSet => "daemonsets.apps",
            Self::CronJob => "cronjobs.batch",
            Self::Job => "jobs.batch",
            Self::Rollout => "rollouts.argoproj.io",
            Self::DeploymentConfig => "deploymentconfigs.apps.openshift.io",
            Self::Configured(slot) => crate::rules::configured_kinds::api_resource(slot),
        }
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
