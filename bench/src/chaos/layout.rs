//! What a chaos run creates: namespaces, ConfigMaps and Secrets with unique content per update (the bench's
//! [`objects::content`]), Deployments each using exactly one resource, and for fault 4 Argo Rollouts.
//!
//! One resource per workload keeps "the final content hash of what it uses" well defined in both strategies:
//! the annotations strategy records only the last resource a workload was reloaded for.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, PostParams},
};
use serde_json::json;

use super::{ChaosOptions, observe::WorkloadKind};
use crate::{
    Error,
    measure::tracker::Kind,
    scenarios::{ConfigDef, ConfigKind, RefHow, WorkloadDef, objects},
};

/// The Argo Rollouts CRD of the integration tests (real group, version, kind and status subresource).
pub const ROLLOUT_CRD: &str = include_str!("../../../tests/crds/rollouts.argoproj.io.json");
/// Its name.
pub const ROLLOUT_CRD_NAME: &str = "rollouts.argoproj.io";
/// Rollouts created per incarnation of the CRD (fault 4), using the first resources of the first namespace.
pub const ROLLOUTS: usize = 4;
/// OpenKruise v1.8.4's CloneSet CRD, as the integration tests install it (fault 8).
pub const CLONESET_CRD: &str = include_str!("../../../tests/crds/clonesets.apps.kruise.io.yaml");

/// A workload of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct ChaosWorkload {
    /// Deployment or Rollout.
    pub kind: WorkloadKind,
    /// Index of its namespace.
    pub ns: usize,
    /// Its name.
    pub name: String,
    /// The one resource it uses (index into [`ChaosLayout::configs`]).
    pub resource: usize,
    /// How its pod spec references the resource.
    pub how: RefHow,
}

/// Everything a run creates.
#[derive(Clone, Debug)]
pub struct ChaosLayout {
    /// Namespace names.
    pub namespaces: Vec<String>,
    /// ConfigMaps and Secrets.
    pub configs: Vec<ConfigDef>,
    /// Deployments (present from the start).
    pub deployments: Vec<ChaosWorkload>,
}

impl ChaosLayout {
    /// The layout for run `tag`: per namespace `configmaps_per_ns` ConfigMaps and `secrets_per_ns` Secrets, each
    /// used by `workloads_per_resource` Deployments (ConfigMaps through `envFrom` and `valueFrom`, Secrets through
    /// a volume and a projected volume, alternately).
    pub fn new(opts: &ChaosOptions, tag: &str) -> Self {
        let namespaces: Vec<String> = (0..opts.namespaces).map(|i| format!("{tag}-{i}")).collect();
        let mut configs = Vec::new();
        let mut deployments = Vec::new();
        for ns in 0..opts.namespaces {
            let cms = (0..opts.configmaps_per_ns).map(|i| (ConfigKind::ConfigMap, format!("cm-{i}")));
            let secrets = (0..opts.secrets_per_ns).map(|i| (ConfigKind::Secret, format!("secret-{i}")));
            for (kind, name) in cms.chain(secrets) {
                let resource = configs.len();
                for m in 0..opts.workloads_per_resource {
                    let how = match (kind, m % 2) {
                        (ConfigKind::ConfigMap, 0) => RefHow::EnvFrom,
                        (ConfigKind::ConfigMap, _) => RefHow::ValueFrom,
                        (ConfigKind::Secret, 0) => RefHow::Volume,
                        (ConfigKind::Secret, _) => RefHow::Projected,
                    };
                    let name = format!("{name}-d{m}");
                    deployments.push(ChaosWorkload { kind: WorkloadKind::Deployment, ns, name, resource, how });
                }
                configs.push(ConfigDef { kind, ns, name, pad_bytes: 0 });
            }
        }
        Self { namespaces, configs, deployments }
    }

    /// The Rollouts of incarnation `suffix` (`a` before the CRD is deleted, `b` after it is re-created): one
    /// per resource of the first namespace, up to [`ROLLOUTS`].
    pub fn rollouts(&self, suffix: &str) -> Vec<ChaosWorkload> {
        self.custom(WorkloadKind::Rollout, &format!("ro-{suffix}"))
    }

    /// The CloneSets of fault 8: one per resource of the first namespace, up to [`ROLLOUTS`].
    pub fn clonesets(&self) -> Vec<ChaosWorkload> {
        self.custom(WorkloadKind::CloneSet, "cs")
    }

    /// The `evict-pods` Deployments of faults 8 and 9: one per resource of the first namespace, up to 2.
    pub fn evicting(&self) -> Vec<ChaosWorkload> {
        self.custom(WorkloadKind::Deployment, "ev").into_iter().take(2).collect()
    }

    /// Fault 9's `delete-pods` DaemonSet, on the first resource of the first namespace.
    pub fn deleting_daemon_set(&self) -> Vec<ChaosWorkload> {
        self.custom(WorkloadKind::DaemonSet, "ds").into_iter().take(1).collect()
    }

    fn custom(&self, kind: WorkloadKind, suffix: &str) -> Vec<ChaosWorkload> {
        let first_ns = self.configs.iter().enumerate().filter(|(_, c)| c.ns == 0).take(ROLLOUTS);
        first_ns
            .map(|(resource, c)| ChaosWorkload {
                kind,
                ns: 0,
                name: format!("{}-{suffix}", c.name),
                resource,
                how: if c.kind == ConfigKind::ConfigMap { RefHow::EnvFrom } else { RefHow::Volume },
            })
            .collect()
    }

    fn refs(&self, w: &ChaosWorkload) -> Vec<(ConfigKind, String, RefHow)> {
        let c = &self.configs[w.resource];
        vec![(c.kind, c.name.clone(), w.how)]
    }

    /// Creates the namespaces (labelled for the bench, so a crashed run can be cleaned up by label).
    pub async fn create_namespaces(&self, client: &Client) -> Result<(), Error> {
        for ns in &self.namespaces {
            objects::create_namespace(client, ns).await?;
        }
        Ok(())
    }

    /// Asks for the namespaces' deletion.
    pub async fn delete_namespaces(&self, client: &Client) {
        for ns in &self.namespaces {
            objects::delete_namespace(client, ns).await;
        }
    }

    /// Creates every resource with its initial content (sequence 0) and every Deployment.
    pub async fn create_objects(&self, client: &Client, tag: &str) -> Result<(), Error> {
        for def in &self.configs {
            let ns = &self.namespaces[def.ns];
            objects::create_config(client, def, ns, tag, &objects::content(def, ns, 0)).await?;
        }
        for w in &self.deployments {
            let def = WorkloadDef {
                kind: Kind::Deployment,
                ns: w.ns,
                name: w.name.clone(),
                refs: vec![],
                pause_period: None,
                keys_used: false,
                named_lists: None,
            };
            objects::create_workload(client, &def, &self.namespaces[w.ns], tag, &self.refs(w)).await?;
        }
        Ok(())
    }

    /// Creates a Rollout or a CloneSet (auto-annotated, one replica, the bench's pod spec), labelled for the run.
    pub async fn create_custom(&self, client: &Client, w: &ChaosWorkload, tag: &str) -> Result<(), Error> {
        let ns = &self.namespaces[w.ns];
        let labels = json!({"app": w.name});
        let resource = w.kind.api_resource();
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": resource.api_version, "kind": resource.kind,
            "metadata": {"name": w.name, "namespace": ns, "labels": {objects::RUN_LABEL: tag},
                         "annotations": {objects::AUTO: "true"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": objects::pod_spec(&self.refs(w))}}
        }))?;
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource)
            .create(&PostParams::default(), &obj)
            .await
            .map(|_| ())
            .map_err(|e| Error::kube(format!("create {} {ns}/{}", resource.kind, w.name), e))
    }
}

/// The Argo Rollout API resource.
pub fn rollout_resource() -> ApiResource {
    WorkloadKind::Rollout.api_resource()
}

/// Creates the Rollout CRD if it is missing and waits until it is established; returns how long that took.
pub async fn install_rollout_crd(client: &Client, timeout: Duration) -> Result<Duration, Error> {
    install_crd(client, serde_json::from_str(ROLLOUT_CRD)?, timeout).await
}

/// Creates the CloneSet CRD if it is missing and waits until it is established (fault 8).
pub async fn install_cloneset_crd(client: &Client, timeout: Duration) -> Result<Duration, Error> {
    let crd = serde_saphyr::from_str(CLONESET_CRD).map_err(|e| Error::Invalid(format!("the CloneSet CRD: {e}")))?;
    install_crd(client, crd, timeout).await
}

async fn install_crd(client: &Client, crd: CustomResourceDefinition, timeout: Duration) -> Result<Duration, Error> {
    let start = Instant::now();
    let name = crd.metadata.name.clone().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(Error::kube(format!("create the CRD {name}"), e)),
    }
    loop {
        let established = api.get_opt(&name).await.ok().flatten().is_some_and(|c| {
            let conditions = c.status.and_then(|s| s.conditions).unwrap_or_default();
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True")
        });
        if established {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout(format!("the CRD {name} to be established")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the Rollout CRD and waits until it is gone (the API server deletes every Rollout first).
pub async fn delete_rollout_crd(client: &Client, timeout: Duration) -> Result<Duration, Error> {
    let start = Instant::now();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.delete(ROLLOUT_CRD_NAME, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(Error::kube("delete the Rollout CRD", e)),
    }
    while matches!(api.get_opt(ROLLOUT_CRD_NAME).await, Ok(Some(_)) | Err(_)) {
        if start.elapsed() > timeout {
            return Err(Error::Timeout("the Rollout CRD to be deleted".into()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_deployment_uses_one_resource_of_its_namespace() {
        let opts = ChaosOptions::default();
        let l = ChaosLayout::new(&opts, "chaos-x");
        assert_eq!(l.namespaces, ["chaos-x-0", "chaos-x-1", "chaos-x-2"]);
        assert_eq!(l.configs.len(), 15);
        assert_eq!(l.deployments.len(), 30);
        for d in &l.deployments {
            assert_eq!(l.configs[d.resource].ns, d.ns, "{d:?}");
        }
        let secrets = l.configs.iter().filter(|c| c.kind == ConfigKind::Secret).count();
        assert_eq!(secrets, 6);
        let ro = l.rollouts("b");
        assert_eq!(ro.len(), ROLLOUTS);
        assert!(ro.iter().all(|r| r.ns == 0 && r.name.ends_with("-ro-b") && r.kind == WorkloadKind::Rollout));
    }
}
