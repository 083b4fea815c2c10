//! apps/v1 DaemonSet: the pod template at `spec.template`, patched with a strategic merge patch (upstream v1).

use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{KindFacts, WorkloadKind, WorkloadObject};

impl WorkloadObject for DaemonSet {
    const KIND: WorkloadKind = WorkloadKind::DaemonSet;
    type Spec = k8s_openapi::api::apps::v1::DaemonSetSpec;
    type Status = k8s_openapi::api::apps::v1::DaemonSetStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "apps/v1",
            api_resource: "daemonsets.apps",
            names: &["daemonset", "d"],
            ..KindFacts::ROLLED_OUT
        }
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<Self::Spec>, status: Option<Self::Status>) -> Self {
        Self { metadata, spec, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn rollout(&self) -> super::RolloutState {
        super::rollout::daemonset(self)
    }
}
