//! Shared helpers for the integration tests: run the built `reloader` binary against the test cluster the
//! way a user would, create workloads of each kind, observe rollouts.

#![allow(dead_code)] // each test binary uses a different subset

mod binary;
pub mod chart;
pub mod csi;
pub mod custom;
pub mod proxy;
pub mod rbac;
mod receiver;
pub mod webhook;

#[allow(unused_imports)] // not every test binary starts the controller or runs explain
pub use binary::{Counter, Reloader, built_commit, events_received, explain_as, explain_with};
#[allow(unused_imports)] // not every test binary receives webhooks
pub use receiver::{Answer, Received, Receiver};

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    ByteString,
    api::{
        apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet},
        core::v1::{ConfigMap, PodTemplateSpec, Secret},
    },
};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
pub use testenv::harness::{TestNamespace, holds_for, wait_for};

/// How long a reload may take before a test fails.
pub const RELOAD_WAIT: Duration = Duration::from_secs(30);
/// How long "nothing happens" is observed.
pub const QUIET_PERIOD: Duration = Duration::from_secs(3);

/// The workload kinds every reload behaviour is tested on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl Kind {
    /// Creates a workload named `name` with `app=<name>` labels, the given metadata annotations, pod template
    /// annotations and pod spec.
    pub async fn create(
        self,
        ns: &TestNamespace,
        name: &str,
        annotations: Value,
        template_annotations: Value,
        pod_spec: Value,
    ) {
        let template =
            json!({"metadata": {"labels": {"app": name}, "annotations": template_annotations}, "spec": pod_spec});
        let mut spec = json!({"selector": {"matchLabels": {"app": name}}, "template": template});
        let metadata = json!({"name": name, "annotations": annotations});
        let pp = PostParams::default();
        match self {
            Self::Deployment => {
                spec["replicas"] = json!(1);
                let obj: Deployment =
                    serde_json::from_value(json!({"metadata": metadata, "spec": spec})).expect("deployment");
                ns.api::<Deployment>().create(&pp, &obj).await.expect("create deployment");
            }
            Self::StatefulSet => {
                spec["replicas"] = json!(1);
                spec["serviceName"] = json!(name);
                let obj: StatefulSet =
                    serde_json::from_value(json!({"metadata": metadata, "spec": spec})).expect("sts");
                ns.api::<StatefulSet>().create(&pp, &obj).await.expect("create statefulset");
            }
            Self::DaemonSet => {
                let obj: DaemonSet = serde_json::from_value(json!({"metadata": metadata, "spec": spec})).expect("ds");
                ns.api::<DaemonSet>().create(&pp, &obj).await.expect("create daemonset");
            }
        }
    }

    /// The workload's current pod template.
    pub async fn template(self, ns: &TestNamespace, name: &str) -> PodTemplateSpec {
        match self {
            Self::Deployment => ns.api::<Deployment>().get(name).await.ok().and_then(|o| o.spec).map(|s| s.template),
            Self::StatefulSet => ns.api::<StatefulSet>().get(name).await.ok().and_then(|o| o.spec).map(|s| s.template),
            Self::DaemonSet => ns.api::<DaemonSet>().get(name).await.ok().and_then(|o| o.spec).map(|s| s.template),
        }
        .unwrap_or_default()
    }

    /// Waits for the controller's first-sight record (`applied-hashes`) on the workload: it has seen the workload
    /// and the resources it uses.
    pub async fn wait_recorded(self, ns: &TestNamespace, name: &str) {
        const APPLIED: &str = "reloader.stakater.com/applied-hashes";
        wait_for(&format!("{self:?} {name}'s first-sight record"), RELOAD_WAIT, || async {
            let annotations = match self {
                Self::Deployment => ns.api::<Deployment>().get(name).await.map(|o| o.metadata.annotations),
                Self::StatefulSet => ns.api::<StatefulSet>().get(name).await.map(|o| o.metadata.annotations),
                Self::DaemonSet => ns.api::<DaemonSet>().get(name).await.map(|o| o.metadata.annotations),
            };
            let recorded = annotations.map_err(|e| e.to_string())?.unwrap_or_default().contains_key(APPLIED);
            if recorded { Ok(()) } else { Err("no record".to_owned()) }
        })
        .await;
    }

    /// Rollout revisions the cluster created: ReplicaSets of a Deployment, ControllerRevisions otherwise.
    pub async fn revisions(self, ns: &TestNamespace, name: &str) -> usize {
        let owned_by = |owners: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>| {
            owners.into_iter().flatten().any(|o| o.name == name && o.controller == Some(true))
        };
        match self {
            Self::Deployment => {
                let list = ns.api::<ReplicaSet>().list(&ListParams::default()).await.expect("list replicasets");
                list.items.iter().filter(|r| owned_by(r.metadata.owner_references.as_ref())).count()
            }
            Self::StatefulSet | Self::DaemonSet => {
                let list = ns.api::<ControllerRevision>().list(&ListParams::default()).await.expect("list revisions");
                let kind = if self == Self::StatefulSet { "StatefulSet" } else { "DaemonSet" };
                list.items
                    .iter()
                    .filter(|r| r.owner_references().iter().any(|o| o.kind == kind && o.name == name))
                    .count()
            }
        }
    }

    /// Waits until the workload has exactly `n` revisions.
    pub async fn wait_revisions(self, ns: &TestNamespace, name: &str, n: usize) {
        wait_for(&format!("{self:?} {name} to have {n} revision(s)"), RELOAD_WAIT, || async {
            let got = self.revisions(ns, name).await;
            if got == n { Ok(()) } else { Err(format!("{got} revision(s)")) }
        })
        .await;
    }

    /// Asserts the workload reaches `n` revisions and keeps exactly `n` for the quiet period. Waiting first: a
    /// template change shows before the Deployment controller creates its ReplicaSet (a loaded `make test` read
    /// 1 revision 4 ms after the reload it was about to hold).
    pub async fn stays_at_revisions(self, ns: &TestNamespace, name: &str, n: usize) {
        self.wait_revisions(ns, name, n).await;
        holds_for(&format!("{self:?} {name} to stay at {n} revision(s)"), QUIET_PERIOD, || async {
            let got = self.revisions(ns, name).await;
            if got == n { Ok(()) } else { Err(format!("{got} revision(s)")) }
        })
        .await;
    }

    /// The value of env var `env` on container `container` of the template.
    pub async fn env(self, ns: &TestNamespace, name: &str, container: &str, env: &str) -> Option<String> {
        let t = self.template(ns, name).await;
        t.spec?.containers.into_iter().find(|c| c.name == container)?.env?.into_iter().find(|e| e.name == env)?.value
    }
}

/// All kinds.
pub const KINDS: [Kind; 3] = [Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet];

/// Generates one `#[tokio::test]` per workload kind from `async fn $name(kind: Kind)`.
#[macro_export]
macro_rules! per_kind {
    ($($name:ident),* $(,)?) => {
        $(mod $name {
            use super::*;
            #[tokio::test]
            async fn deployment() { super::$name(Kind::Deployment).await }
            #[tokio::test]
            async fn statefulset() { super::$name(Kind::StatefulSet).await }
            #[tokio::test]
            async fn daemonset() { super::$name(Kind::DaemonSet).await }
        })*
    };
}

/// testenv's KWOK keeps a pod not Ready when it carries this label and, with the label empty, a `STAKATER_*`
/// variable (with a value, that hash in a `STAKATER_*` variable or `last-reloaded-from`; testenv/build.sh).
pub const HELD: &str = "testenv.reloader.dev/unready-when-reloaded";

/// A one-replica Deployment like [`Kind::create`]'s whose pods carry [`HELD`] empty: its pods before a reload become
/// Ready, those a `STAKATER_*` reload creates do not, so that rollout stays in progress until
/// [`release_held_pods`].
pub async fn create_held_deployment(ns: &TestNamespace, name: &str, annotations: Value, pod_spec: Value) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, HELD: ""}}, "spec": pod_spec}}
    }))
    .expect("deployment");
    ns.api::<Deployment>().create(&PostParams::default(), &d).await.expect("create held deployment");
}

/// Lets the held pods of `app` become Ready: [`HELD`] removed from each.
pub async fn release_held_pods(ns: &TestNamespace, app: &str) {
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let held = pods.list(&ListParams::default().labels(&format!("app={app},{HELD}"))).await.expect("list held pods");
    for pod in held.items {
        let name = pod.metadata.name.unwrap_or_default();
        release_pod(&pods, &name).await.expect("release a held pod");
    }
}

/// Removes [`HELD`] from pod `name`.
pub async fn release_pod(pods: &kube::Api<k8s_openapi::api::core::v1::Pod>, name: &str) -> Result<(), kube::Error> {
    let release = kube::api::Patch::Merge(json!({"metadata": {"labels": { HELD: null }}}));
    pods.patch(name, &kube::api::PatchParams::default(), &release).await.map(|_| ())
}

/// A one-container pod spec using `envFrom` of ConfigMap `cm`.
pub fn env_from_configmap(cm: &str) -> Value {
    json!({"containers": [{"name": "app", "image": "registry.invalid/app:1", "envFrom": [{"configMapRef": {"name": cm}}]}]})
}

/// A one-container pod spec mounting Secret `secret` as a volume.
pub fn volume_secret(secret: &str) -> Value {
    json!({
        "containers": [{"name": "app", "image": "registry.invalid/app:1", "volumeMounts": [{"name": "s", "mountPath": "/s"}]}],
        "volumes": [{"name": "s", "secret": {"secretName": secret}}]
    })
}

/// A pod spec that uses nothing.
pub fn plain_pod() -> Value {
    json!({"containers": [{"name": "app", "image": "registry.invalid/app:1"}]})
}

fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// Creates a ConfigMap.
pub async fn create_configmap(ns: &TestNamespace, name: &str, data: &[(&str, &str)], annotations: &[(&str, &str)]) {
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            annotations: Some(string_map(annotations)),
            ..Default::default()
        },
        data: Some(string_map(data)),
        ..Default::default()
    };
    ns.api::<ConfigMap>().create(&PostParams::default(), &cm).await.expect("create configmap");
}

/// Replaces a ConfigMap's data in one write.
pub async fn set_configmap_data(ns: &TestNamespace, name: &str, data: &[(&str, &str)]) {
    let api = ns.api::<ConfigMap>();
    let mut cm = api.get(name).await.expect("get configmap");
    cm.data = Some(string_map(data));
    api.replace(name, &PostParams::default(), &cm).await.expect("replace configmap");
}

/// Merges labels and annotations into a resource's metadata (no data change).
pub async fn touch_configmap_metadata(
    ns: &TestNamespace,
    name: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) {
    let patch = json!({"metadata": {"labels": string_map(labels), "annotations": string_map(annotations)}});
    ns.api::<ConfigMap>().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch metadata");
}

/// Creates a Secret from string values.
pub async fn create_secret(ns: &TestNamespace, name: &str, data: &[(&str, &str)], annotations: &[(&str, &str)]) {
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            annotations: Some(string_map(annotations)),
            ..Default::default()
        },
        data: Some(data.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec()))).collect()),
        ..Default::default()
    };
    ns.api::<Secret>().create(&PostParams::default(), &s).await.expect("create secret");
}

/// Replaces one key of a Secret's data.
pub async fn set_secret_value(ns: &TestNamespace, name: &str, key: &str, value: &str) {
    let patch = json!({"stringData": {key: value}});
    ns.api::<Secret>().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch secret");
}

/// Upstream's hash of ConfigMap data given as pairs.
pub fn configmap_hash(data: &[(&str, &str)]) -> String {
    reloader::rules::hash::configmap(Some(&string_map(data)), None).to_string()
}

/// Upstream's hash of Secret data given as pairs.
pub fn secret_hash(data: &[(&str, &str)]) -> String {
    let map = data.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec()))).collect();
    reloader::rules::hash::secret(Some(&map)).to_string()
}

/// Deletes a ConfigMap.
pub async fn delete_configmap(ns: &TestNamespace, name: &str) {
    let _ = ns.api::<ConfigMap>().delete(name, &Default::default()).await;
}

/// The name of a workload's namespace-scoped object API.
pub fn api<K>(ns: &TestNamespace) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    ns.api::<K>()
}

/// A minimal HTTP GET (no client dependency needed for tests): returns (status, body).
pub async fn http_get(base: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read response");
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The value of one sample (`name{labels}` exactly as exposed) in a Prometheus text exposition.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
}

/// Creates the CRD if missing and waits until it is served.
pub async fn install_crd(client: &kube::Client, text: &str) {
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_str(text).expect("crd json");
    let name = crd.metadata.name.clone().expect("name");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    // Test binaries share the cluster's CRDs, and one may have deleted this CRD just before (its objects are
    // still being removed): wait until it is gone and create it again, whatever ran before.
    wait_for(&format!("CRD {name} created or present"), RELOAD_WAIT, || async {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => match crds.get_opt(&name).await {
                Ok(Some(c)) if c.metadata.deletion_timestamp.is_some() => Err("the CRD is being deleted".to_owned()),
                _ => Ok(()),
            },
            Err(e) => Err(format!("create crd {name}: {e}")),
        }
    })
    .await;
    wait_for(&format!("CRD {name} established"), RELOAD_WAIT, || async {
        let c = crds.get(&name).await.map_err(|e| e.to_string())?;
        if c.metadata.deletion_timestamp.is_some() {
            return Err("being deleted".into());
        }
        let established = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established { Ok(()) } else { Err("not established".into()) }
    })
    .await;
}

/// Asserts the Job's first container carries `STAKATER_CFG_CONFIGMAP` for ConfigMap data `key=value`.
pub fn assert_carries_hash(job: &k8s_openapi::api::batch::v1::Job, key: &str, value: &str) {
    let env = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers[0].env.clone())
        .unwrap_or_default();
    let expected = configmap_hash(&[(key, value)]);
    assert!(
        env.iter().any(|e| e.name == "STAKATER_CFG_CONFIGMAP" && e.value.as_deref() == Some(expected.as_str())),
        "{env:?}"
    );
}
