//! Kinds added by `--workload-kind` (`crate::rules::configured_kinds`, issue 29): one Rust type per slot of the kind
//! table, [`Configured<SLOT>`], whose API names, pod-template path and status rule are read from the registry. It
//! keeps only what reloads need — metadata, the pod template, the desired replicas and the status as JSON — and is
//! written like the other kinds served by CRDs (`custom::write`: a JSON merge patch under a `resourceVersion`
//! precondition, unknown fields kept).

use std::borrow::Cow;

use k8s_openapi::{
    NamespaceResourceScope, api::core::v1::PodTemplateSpec, apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{KindFacts, RolloutState, Watched, WorkloadKind, WorkloadObject, patch::WriteStyle};
use crate::rules::configured_kinds::{self, ConfiguredKind, StatusRule};

/// A workload of the configured kind in slot `SLOT`.
#[derive(Clone, Debug, Default)]
pub struct Configured<const SLOT: u8> {
    /// Object metadata.
    pub metadata: ObjectMeta,
    /// The pod template, from the kind's template path.
    template: Option<PodTemplateSpec>,
    /// `spec.replicas`, when it has one.
    replicas: Option<i64>,
    /// The status, for the kind's status rule.
    status: Option<Value>,
}

impl<const SLOT: u8> Configured<SLOT> {
    fn kind() -> Option<&'static ConfiguredKind> {
        configured_kinds::get(SLOT)
    }
}

impl<const SLOT: u8> kube::Resource for Configured<SLOT> {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed(Self::kind().map_or("", |k| k.kind))
    }
    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed(Self::kind().map_or("", |k| k.group))
    }
    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed(Self::kind().map_or("", |k| k.version))
    }
    fn api_version((): &()) -> Cow<'_, str> {
        Cow::Borrowed(Self::kind().map_or("", |k| k.api_version))
    }
    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed(configured_kinds::plural(SLOT))
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de, const SLOT: u8> Deserialize<'de> for Configured<SLOT> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Whole {
            #[serde(default)]
            metadata: ObjectMeta,
            #[serde(default)]
            spec: Option<Value>,
            #[serde(default)]
            status: Option<Value>,
        }
        let w = Whole::deserialize(deserializer)?;
        Ok(<Self as WorkloadObject>::from_parts(w.metadata, w.spec, w.status))
    }
}

/// Gives a container without a name the name `""`: Knative lets users leave it out (its webhook names it
/// `user-container` later), and a pod spec without it would not decode. The writer finds it by `""` too.
fn name_containers(template: &mut Value) {
    for list in ["containers", "initContainers"] {
        let containers = template.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut);
        for c in containers.into_iter().flatten().filter(|c| c.is_object() && c.get("name").is_none()) {
            c["name"] = Value::String(String::new());
        }
    }
}

impl<const SLOT: u8> WorkloadObject for Configured<SLOT> {
    const KIND: WorkloadKind = WorkloadKind::Configured(SLOT);
    const WRITE: WriteStyle = WriteStyle::MergePatch { restart_at: false };
    type Spec = Value;
    type Status = Value;

    /// From its registration: API names, whether it has a pod template (`=-`: none), whether a status rule tracks
    /// its rollouts. No kind-specific annotation applies to it.
    fn facts() -> KindFacts {
        let kind = Self::kind();
        KindFacts {
            api_version: kind.map_or("", |k| k.api_version),
            api_resource: configured_kinds::api_resource(SLOT),
            names: &[],
            watched: Watched::Configured,
            tracks_rollouts: kind.is_some_and(|k| k.status != StatusRule::Untracked),
            has_pod_template: kind.is_none_or(ConfiguredKind::has_template),
            runs_to_completion: false,
            pause_period: false,
            cronjob_reload: false,
        }
    }

    /// By the registry's rule, with the plural discovery found (`configured_kinds::names_kind`).
    fn named(name: &str) -> bool {
        configured_kinds::slot_named(name) == Some(SLOT)
    }

    fn from_parts(metadata: ObjectMeta, spec: Option<Value>, status: Option<Value>) -> Self {
        let mut spec = spec.unwrap_or_default();
        let pointer = Self::template_pointer();
        // The template is taken out of the spec, not copied: the rest of the spec is dropped here. A kind without
        // one (`=-`) has none: its references are read from its pods.
        let in_spec = pointer.strip_prefix("/spec").unwrap_or(pointer);
        let mut template = spec.pointer_mut(in_spec).filter(|_| !pointer.is_empty()).map(Value::take);
        if let Some(t) = template.as_mut() {
            name_containers(t);
        }
        let template = template.and_then(|t| serde_json::from_value(t).ok());
        let replicas = spec.get("replicas").and_then(Value::as_i64);
        Self { metadata, template, replicas, status }
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.template.as_ref()
    }

    fn rollout(&self) -> RolloutState {
        let rule = Self::kind().map_or(StatusRule::Untracked, |k| k.status);
        super::rollout::configured(rule, self.metadata.generation, self.replicas, self.status.as_ref())
    }

    fn template_pointer() -> &'static str {
        Self::kind().map_or("/spec/template", |k| k.template_pointer)
    }

    fn named_revisions() -> bool {
        Self::kind().is_some_and(|k| k.named_revisions)
    }
}
