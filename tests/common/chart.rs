//! The Helm chart and the static manifests as a user meets them: the real `helm` and `kubectl` binaries (built
//! by testenv/build.sh), objects applied to the test cluster, and kubeconfigs holding a ServiceAccount's token.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::{
    Api, Client,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    config::{AuthInfo, Kubeconfig},
    discovery::{Scope, pinned_kind},
};
use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart folder.
pub fn chart_dir() -> PathBuf {
    repo().join("deploy/helm/reloader")
}

/// A testenv-built tool (`helm`, `kubectl`): from `TESTENV_BIN_DIR` when `testenv run` set it, else from PATH.
pub fn tool(name: &str) -> PathBuf {
    std::env::var_os("TESTENV_BIN_DIR").map(|d| PathBuf::from(d).join(name)).unwrap_or_else(|| name.into())
}

/// Runs `program args…` with the test cluster's kubeconfig; stdout on success, stderr (and stdout) on failure.
pub fn run(program: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .env("KUBECONFIG", testenv::harness::kubeconfig_path())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{} {}: {}\n{stdout}", program.display(), args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// `helm args…`, panicking with helm's message on failure.
pub fn helm(args: &[&str]) -> String {
    run(&tool("helm"), args).unwrap_or_else(|e| panic!("{e}"))
}

/// `helm template <release> <chart> --namespace <namespace> <extra…>` as text.
pub fn template_text(release: &str, namespace: &str, extra: &[&str]) -> Result<String, String> {
    let chart = chart_dir();
    let mut args = vec!["template", release, chart.to_str().unwrap_or_default(), "--namespace", namespace];
    args.extend_from_slice(extra);
    run(&tool("helm"), &args)
}

/// Parses multi-document YAML into JSON values, dropping empty documents.
pub fn parse_documents(text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("rendered YAML: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The rendered objects of `helm template`.
pub fn template(release: &str, namespace: &str, extra: &[&str]) -> Vec<Value> {
    parse_documents(&template_text(release, namespace, extra).unwrap_or_else(|e| panic!("{e}")))
}

/// The one object of `kind` (and `name`, when given) among `objects`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n))
        .unwrap_or_else(|| panic!("no {kind} {name:?} among the rendered objects"))
}

/// The API for an object's kind, namespaced or cluster-wide as the API server says.
pub async fn api_for(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap_or_default());
    let (resource, caps) = pinned_kind(client, &gvk).await.unwrap_or_else(|e| panic!("discover {gvk:?}: {e}"));
    match (caps.scope, object["metadata"]["namespace"].as_str()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
        (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
    }
}

/// Server-side applies every object (as an admin, the way `kubectl apply` would).
pub async fn apply(client: &Client, objects: &[Value]) {
    for object in objects {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let params = PatchParams::apply("reloader-tests").force();
        api_for(client, object)
            .await
            .patch(&name, &params, &Patch::Apply(object))
            .await
            .unwrap_or_else(|e| panic!("apply {} {name}: {e}", object["kind"]));
    }
}

/// Mints a token for the ServiceAccount (TokenRequest) and writes a kubeconfig that uses it, next to the
/// admin kubeconfig. The controller started with it has exactly the ServiceAccount's permissions.
pub async fn service_account_kubeconfig(client: &Client, namespace: &str, service_account: &str) -> PathBuf {
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("token for {namespace}/{service_account}: {e}"))
        .status
        .map(|s| s.token)
        .unwrap_or_else(|| panic!("token request for {namespace}/{service_account} returned no status"));
    let admin = testenv::harness::kubeconfig_path();
    let mut config = Kubeconfig::read_from(&admin).unwrap_or_else(|e| panic!("read {}: {e}", admin.display()));
    for named in &mut config.auth_infos {
        named.auth_info = Some(AuthInfo { token: Some(token.clone().into()), ..Default::default() });
    }
    let path = admin.with_file_name(format!("kubeconfig-{namespace}-{service_account}"));
    let text = serde_json::to_string(&config).unwrap_or_else(|e| panic!("kubeconfig json: {e}"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// The controller's command line and environment as the rendered Deployment sets them, with the pod's
/// fields (`fieldRef`) resolved as the kubelet would for a pod named `pod_name` in `namespace`.
pub fn container_command(objects: &[Value], namespace: &str, pod_name: &str) -> (Vec<String>, Vec<(String, String)>) {
    let container = &find(objects, "Deployment", None)["spec"]["template"]["spec"]["containers"][0];
    let args = container["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_owned));
    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_owned();
        let value = match (var["value"].as_str(), var["valueFrom"]["fieldRef"]["fieldPath"].as_str()) {
            (Some(v), _) => v.to_owned(),
            (None, Some("metadata.namespace")) => namespace.to_owned(),
            (None, Some("metadata.name")) => pod_name.to_owned(),
            _ => continue, // Secret references: not used by these tests
        };
        env.push((name, value));
    }
    (args.collect(), env)
}

/// The controller as the rendered `objects` run it — `binary` with the Deployment's arguments (plus `extra_args`)
/// and environment as pod `reloader-0` in `pod_namespace`, and the token of its ServiceAccount `service_account`
/// there — reloads a Deployment of `ns` when the ConfigMap it uses changes.
pub async fn installed_controller_reloads(
    binary: &Path,
    objects: &[Value],
    pod_namespace: &str,
    service_account: &str,
    extra_args: &[String],
    ns: &super::TestNamespace,
) {
    use super::{Kind, Reloader, create_configmap, env_from_configmap, set_configmap_data};
    let (mut args, mut env) = container_command(objects, pod_namespace, "reloader-0");
    args.extend_from_slice(extra_args);
    let client = testenv::harness::client().await;
    let kubeconfig = service_account_kubeconfig(&client, pod_namespace, service_account).await;
    env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    create_configmap(ns, "cfg", &[("k", "1")], &[]).await;
    let auto = serde_json::json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(ns, "web", auto, serde_json::json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.wait_revisions(ns, "web", 1).await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let reloader = Reloader::spawn_binary(binary, &args, &env);
    reloader.wait_log("watches synced").await;
    set_configmap_data(ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(ns, "web", 2).await;
}
