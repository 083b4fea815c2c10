//! Workload kinds served by custom resources (Argo Rollouts, OpenShift DeploymentConfigs as tests install
//! them): slim types that read only metadata and `spec.template`, and writes as JSON merge patches
//! (strategic merge patch is rejected for custom resources). A merge patch replaces lists whole, so the pod
//! template is read fresh, changed as JSON (unknown fields survive) and written back under a
//! `resourceVersion` precondition: a concurrent change makes it a 409, which is retried.

use k8s_openapi::{api::core::v1::PodTemplateSpec, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch},
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    KindFacts, Watched, WorkloadKey,
    patch::{WorkloadWrite, WriteStyle, metadata_fragment, patch_for_generation},
    rollout::RolloutStatus,
};
use crate::constants::annotation::RESTARTED_AT;

/// `spec` of a custom workload: only what reloads need.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSpec {
    /// The pod template.
    #[serde(default)]
    pub template: Option<PodTemplateSpec>,
    /// Desired replicas (the restart budget compares the status with it).
    #[serde(default)]
    pub replicas: Option<i32>,
}

/// Declares a slim namespaced custom workload type.
macro_rules! custom_workload {
    ($(#[$doc:meta])* $name:ident, $group:literal, $version:literal, $plural:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
        pub struct $name {
            /// Object metadata.
            pub metadata: ObjectMeta,
            /// Spec (template and replicas only).
            #[serde(default)]
            pub spec: Option<TemplateSpec>,
            /// Status (what tells a rollout's progress only).
            #[serde(default)]
            pub status: Option<RolloutStatus>,
        }

        impl_namespaced_resource!($name, $group, $version, $plural);
    };
}

custom_workload!(
    /// argoproj.io/v1alpha1 Rollout.
    Rollout, "argoproj.io", "v1alpha1", "rollouts"
);
custom_workload!(
    /// apps.openshift.io/v1 DeploymentConfig.
    DeploymentConfig, "apps.openshift.io", "v1", "deploymentconfigs"
);

/// Writes a reload into a custom workload with one merge patch. The `restart` strategy sets only `spec.restartAt`
/// where the kind has it (`restart_at`: Argo Rollouts), so the template does not drift, and `kubectl rollout
/// restart`'s `restartedAt` in the template otherwise; the hashes still go into the metadata record.
pub(super) async fn write<K: super::WorkloadObject>(
    client: &Client,
    key: &WorkloadKey,
    w: &WorkloadWrite<'_>,
    restart_at: bool,
) -> Result<Option<i64>, kube::Error> {
    let gvk = GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()));
    let resource = ApiResource::from_gvk_with_plural(&gvk, &K::plural(&()));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.namespace, &resource);
    let mut body = json!({});
    if let Some(metadata) = metadata_fragment(w) {
        body["metadata"] = metadata;
    }
    if !w.changes.is_empty() {
        if w.restart && restart_at {
            body["spec"] = json!({"restartAt": crate::rules::strategy::argo_restart_at(w.changed_at)});
        } else {
            let current = api.get(&key.name).await?;
            let pointer = K::template_pointer();
            let mut template = current.data.pointer(pointer).cloned().unwrap_or(Value::Null);
            if w.restart {
                let annotations = &mut template["metadata"]["annotations"];
                annotations[RESTARTED_AT] = json!(crate::rules::strategy::restarted_at(w.changed_at));
            } else {
                crate::rules::strategy::apply_to_template_json(
                    &mut template,
                    w.strategy,
                    w.changes,
                    w.changed_at.as_second(),
                );
            }
            if K::named_revisions() {
                rename_revision(&mut template, &key.name, w);
            }
            set_at(&mut body, pointer, template);
            body["metadata"]["resourceVersion"] = json!(current.metadata.resource_version);
        }
    }
    if body == json!({}) {
        return Ok(None);
    }
    let url = <DynamicObject as kube::Resource>::url_path(&resource, Some(&key.namespace));
    patch_for_generation(client, &url, &key.name, &Patch::Merge(&body)).await
}

/// Puts `value` at the JSON `pointer` (`/spec/template`) of `body`, creating the objects on the way.
fn set_at(body: &mut Value, pointer: &str, value: Value) {
    let mut at = body;
    for segment in pointer.split('/').filter(|s| !s.is_empty()) {
        at = &mut at[segment];
    }
    *at = value;
}

/// Knative: a template that names its revision (`metadata.name`) must name a new one when it changes (the
/// webhook refuses the same name with another template). The new name is `<service>-<8 hex>`, derived from what
/// is written, so a retry writes the same name; a template without a name is left to Knative to name.
fn rename_revision(template: &mut Value, service: &str, w: &WorkloadWrite<'_>) {
    if template["metadata"]["name"].as_str().is_none() {
        return;
    }
    let entries = w.changes.iter().map(|c| format!("{}/{}={}", c.kind, c.name, c.hash).into_bytes());
    let at = w.changed_at.to_string().into_bytes();
    let digest = crate::rules::hash::ContentHash::of_entries(entries.chain([at]).collect()).to_string();
    let prefix: String = service.chars().take(63 - 9).collect();
    template["metadata"]["name"] = json!(format!("{prefix}-{}", &digest[..8]));
}

impl super::WorkloadObject for Rollout {
    const KIND: super::WorkloadKind = super::WorkloadKind::Rollout;
    const WRITE: WriteStyle = WriteStyle::MergePatch { restart_at: true };
    type Spec = TemplateSpec;
    type Status = RolloutStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "argoproj.io/v1alpha1",
            api_resource: "rollouts.argoproj.io",
            names: &["rollout", "ro"],
            watched: Watched::ArgoRollouts,
            ..KindFacts::ROLLED_OUT
        }
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<TemplateSpec>, status: Option<RolloutStatus>) -> Self {
        Self { metadata, spec, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn rollout(&self) -> super::RolloutState {
        super::rollout::argo_rollout(self.metadata.generation, self.status.as_ref())
    }
}

impl super::WorkloadObject for DeploymentConfig {
    const KIND: super::WorkloadKind = super::WorkloadKind::DeploymentConfig;
    const WRITE: WriteStyle = WriteStyle::MergePatch { restart_at: false };
    type Spec = TemplateSpec;
    type Status = RolloutStatus;

    fn facts() -> KindFacts {
        KindFacts {
            api_version: "apps.openshift.io/v1",
            api_resource: "deploymentconfigs.apps.openshift.io",
            names: &["deploymentconfig", "dc"],
            watched: Watched::OpenShift,
            ..KindFacts::ROLLED_OUT
        }
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<TemplateSpec>, status: Option<RolloutStatus>) -> Self {
        Self { metadata, spec, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn rollout(&self) -> super::RolloutState {
        let desired = self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        super::rollout::deployment_config(self.metadata.generation, desired, self.status.as_ref())
    }
}
