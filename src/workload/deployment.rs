//! apps/v1 Deployment: the pod template at `spec.template`, patched with a strategic merge patch (upstream v1).

use k8s_openapi::api::{apps::v1::Deployment, core::v1::PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{KindFacts, WorkloadKind, WorkloadObject};

impl WorkloadObject for Deployment {
    const KIND: WorkloadKind = WorkloadKind::Deployment;
    type Spec = k8s_openapi::api::apps::v1::DeploymentSpec;
    type Status = k8s_openapi::api::apps::v1::DeploymentStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "apps/v1",
            api_resource: "deployments.apps",
            names: &["deployment", "deploy"],
            pause_period: true,
            ..KindFacts::ROLLED_OUT
        }
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<Self::Spec>, status: Option<Self::Status>) -> Self {
        Self { metadata, spec, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn paused(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
    }

    fn rollout(&self) -> super::RolloutState {
        super::rollout::deployment(self)
    }
}
