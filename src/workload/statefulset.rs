//! apps/v1 StatefulSet: the pod template at `spec.template`, patched with a strategic merge patch (upstream v1).

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{KindFacts, WorkloadKind, WorkloadObject};

impl WorkloadObject for StatefulSet {
    const KIND: WorkloadKind = WorkloadKind::StatefulSet;
    type Spec = k8s_openapi::api::apps::v1::StatefulSetSpec;
    type Status = k8s_openapi::api::apps::v1::StatefulSetStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "apps/v1",
            api_resource: "statefulsets.apps",
            names: &["statefulset", "st"],
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
        super::rollout::statefulset(self)
    }
}
