//! `reloader explain`, both directions, as a user runs it against the real control plane: the answers are the
//! controller's decisions; `-o json` carries the same facts; `--from-file`/`--from-literal` name the keys a new
//! content changes (never values); SecretProviderClasses, out-of-scope namespaces, unwatched kinds and unselected
//! labels are said; installed as `kubectl-reloader`, it is a kubectl plugin honouring `--kubeconfig`,
//! `--context` and the context's namespace.

mod common;

use std::{path::Path, process::Command};

use common::{chart::tool, csi::*, *};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// Runs `reloader <flags> explain <target> -n <ns>`: (success, stdout, stderr).
fn explain(ns: &TestNamespace, flags: &[&str], target: &str) -> (bool, String, String) {
    explain_with(ns, flags, target, &[])
}

#[tokio::test]
async fn explains_reasons_and_whether_a_restart_would_roll_it() {
    let ns = TestNamespace::create("explain").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_secret(&ns, "creds", &[("password", "hunter2")], &[("reloader.stakater.com/ignore", "true")]).await;
    let pod_spec = json!({
        "containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}],
            "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
        "volumes": [{"name": "v", "secret": {"secretName": "creds"}}]
    });
    Kind::Deployment.create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), pod_spec).await;

    let (ok, out, err) = explain(&ns, &[], "deployment/web");
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!(
            "Deployment {ns}/web\n\
             \x20 ConfigMap cfg: reloads on change (auto: referenced via envFrom; container app)\n\
             \x20 Secret creds: does not reload (ignored: resource has the ignore annotation)\n\
             \x20 now: up to date; a controller starting now would not roll it out\n",
            ns = ns.name
        )
    );
    assert!(!out.contains("hunter2") && !err.contains("hunter2"), "never Secret data");

    // The workload records an older content of cfg (as after a change the controller missed while down).
    let older = configmap_hash(&[("k", "0")]);
    let record = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": older}]}]}}}});
    ns.api::<Deployment>().patch("web", &PatchParams::default(), &Patch::Strategic(&record)).await.expect("patch");
    let (ok, out, err) = explain(&ns, &["--resources-to-ignore=secrets"], "deploy/web");
    assert!(ok, "{err}");
    assert!(out.contains("  Secrets are not watched (--resources-to-ignore): they never reload it\n"), "{out}");
    let current = configmap_hash(&[("k", "1")]);
    let expected =
        format!("  now: would roll out for ConfigMap cfg: the workload records {older}, the content is {current}\n");
    assert!(out.ends_with(&expected), "{out}");

    let ignore = format!("--namespaces-to-ignore={}", ns.name);
    let (ok, out, err) = explain(&ns, &[&ignore], "deployment/web");
    assert!(ok, "{err}");
    let line = format!("  namespace {}: ignored (--namespaces-to-ignore); no change in it reloads anything\n", ns.name);
    assert!(out.contains(&line) && !out.contains("now:"), "{out}");
    let (ok, out, err) = explain(&ns, &["--namespace-selector=team=nobody"], "deployment/web");
    assert!(ok, "{err}");
    assert!(out.contains("does not match --namespace-selector team=nobody"), "{out}");
    let selected = format!("--namespace-selector=kubernetes.io/metadata.name={}", ns.name);
    let (ok, out, err) = explain(&ns, &[&selected], "deployment/web");
    assert!(ok && !out.contains("namespace-selector") && out.contains("now: would roll out"), "{out}{err}");

    let (ok, _, err) = explain(&ns, &[], "deployment/missing");
    assert!(!ok);
    assert!(err.contains(&format!("reading Deployment {}/missing", ns.name)), "{err}");
    let (ok, _, err) = explain(&ns, &[], "pod/web");
    assert!(!ok);
    assert!(err.contains("\"pod/web\" is not <kind>/<name>"), "{err}");
}

#[tokio::test]
async fn explains_which_workloads_a_configmap_or_secret_change_would_roll() {
    let ns = TestNamespace::create("explain-rev").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    create_secret(&ns, "creds", &[("password", "hunter2")], &[("reloader.stakater.com/ignore", "true")]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::StatefulSet.create(&ns, "db", json!({}), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "vault", auto, json!({}), volume_secret("creds")).await;

    let (ok, out, err) = explain(&ns, &[], "configmap/cfg");
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!(
            "ConfigMap {ns}/cfg\n\
             \x20 would roll out (1), strategy env-vars:\n\
             \x20   Deployment web: auto: referenced via envFrom; container app\n\
             \x20 use it but would not roll out (1):\n\
             \x20   StatefulSet db: no matching annotation\n\
             \x20 Rollouts are not watched: never rolled\n",
            ns = ns.name
        )
    );
    let (ok, out, err) = explain(&ns, &["--ignored-workload-types=jobs,cronjobs"], "secret/creds");
    assert!(ok, "{err}");
    assert!(out.contains("  would roll out (0), strategy env-vars:\n"), "{out}");
    assert!(out.contains("    Deployment vault: ignored: resource has the ignore annotation\n"), "{out}");
    assert!(out.contains("  CronJobs are not watched: never rolled\n  Jobs are not watched: never rolled\n"), "{out}");
    assert!(!out.contains("hunter2") && !err.contains("hunter2"), "never Secret data");
    let ignore = format!("--namespaces-to-ignore={}", ns.name);
    let (ok, out, err) = explain(&ns, &[&ignore], "cm/cfg");
    assert!(ok, "{err}");
    assert!(out.contains("ignored (--namespaces-to-ignore); a change rolls nothing"), "{out}");
    assert!(out.contains("would roll out if it were watched (1)"), "{out}");
    let (ok, out, err) = explain(&ns, &[], "configmap/missing");
    assert!(ok, "{err}");
    assert!(out.contains("not found: decisions below assume it has no ignore/match annotation"), "{out}");
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|v| format!("{} {}", v["kind"].as_str().unwrap_or(""), v["name"].as_str().unwrap_or("")))
        .collect()
}

#[tokio::test]
async fn json_answers_carry_the_same_facts_in_both_directions() {
    let ns = TestNamespace::create("explain-json").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto, json!({}), env_from_configmap("cfg")).await;
    Kind::StatefulSet.create(&ns, "db", json!({}), json!({}), env_from_configmap("cfg")).await;

    let (ok, out, err) = explain_with(&ns, &[], "cm/cfg", &["-o", "json"]);
    assert!(ok, "{err}");
    let answer = json_of(&out);
    assert_eq!(answer["kind"], "ConfigMap");
    assert_eq!(answer["namespace"], ns.name.as_str());
    assert_eq!(answer["found"], true);
    assert_eq!(answer["strategy"], "env-vars");
    assert_eq!(
        answer["wouldRoll"],
        json!([{"kind": "Deployment", "name": "web", "reloads": true,
                                            "reason": "auto: referenced via envFrom", "container": "app"}])
    );
    assert_eq!(names(&answer["wouldNotRoll"]), ["StatefulSet db"]);
    assert_eq!(answer["wouldNotRoll"][0]["reason"], "no matching annotation");

    let (ok, out, err) = explain_with(&ns, &[], "deployment/web", &["--output=json"]);
    assert!(ok, "{err}");
    let answer = json_of(&out);
    assert_eq!(
        answer["resources"],
        json!([{"kind": "ConfigMap", "name": "cfg", "reloads": true,
                                            "reason": "auto: referenced via envFrom", "container": "app"}])
    );
    assert_eq!(answer["now"], json!([]), "up to date");
    let (ok, _, err) = explain_with(&ns, &[], "cm/cfg", &["-o", "yaml"]);
    assert!(!ok && err.contains("invalid value 'yaml'"), "{err}");
}

#[tokio::test]
async fn a_proposed_content_names_the_keys_it_changes_and_never_a_value() {
    let ns = TestNamespace::create("explain-preview").await;
    create_configmap(&ns, "cfg", &[("mode", "slow"), ("level", "info")], &[]).await;
    create_secret(&ns, "creds", &[("password", "hunter2"), ("user", "admin")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&ns, "vault", auto, json!({}), volume_secret("creds")).await;

    let dir = std::env::temp_dir().join(format!("explain-preview-{}", ns.name));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("level"), "debug").expect("write");
    let level = dir.join("level").to_string_lossy().into_owned();
    let (ok, out, err) = explain_with(&ns, &[], "configmap/cfg", &["--from-literal=mode=slow", "--from-file", &level]);
    assert!(ok, "{err}");
    assert!(out.contains("  new content: changed level\n"), "{out}");
    assert!(out.contains("  would roll out (1), strategy env-vars:\n    Deployment web:"), "{out}");
    assert!(!out.contains("debug") && !out.contains("slow"), "values never printed: {out}");

    // The same content as now: nothing would roll.
    let (ok, out, err) = explain_with(&ns, &[], "cm/cfg", &["--from-literal=mode=slow", "--from-literal=level=info"]);
    assert!(ok, "{err}");
    assert!(out.contains("  new content: no key changes\n  would roll out (0)"), "{out}");
    assert!(out.contains("    Deployment web: the new content equals the current one\n"), "{out}");

    // A Secret: a rotated password, a removed key, JSON for scripts; neither value appears.
    let (ok, out, err) = explain_with(&ns, &[], "secret/creds", &["--from-literal=password=s3cret", "-o", "json"]);
    assert!(ok, "{err}");
    let answer = json_of(&out);
    assert_eq!(answer["newContent"], json!({"changed": ["password"], "added": [], "removed": ["user"]}));
    assert_eq!(names(&answer["wouldRoll"]), ["Deployment vault"]);
    for secret in ["hunter2", "s3cret", "admin"] {
        assert!(!out.contains(secret) && !err.contains(secret), "never Secret data: {out}{err}");
    }

    // Bad sources are refused before the cluster is asked (status 2), with kubectl's wording.
    let (ok, _, err) = explain_with(&ns, &[], "cm/cfg", &["--from-literal=novalue"]);
    assert!(!ok && err.contains("invalid literal source \"novalue\", expected key=value"), "{err}");
    let (ok, _, err) = explain_with(&ns, &[], "deployment/web", &["--from-literal=a=b"]);
    assert!(!ok && err.contains("apply to configmap/ and secret/ targets"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_secret_provider_class_a_scope_and_a_label_selector_are_explained() {
    let ns = TestNamespace::create("explain-spc").await;
    install_crd(&ns.client, SPC_CRD).await;
    install_crd(&ns.client, SPCPS_CRD).await;
    create_class(&ns, "vault-db", json!({})).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto.clone(), json!({}), mounts("vault-db")).await;
    let excluded = json!({"reloader.stakater.com/auto": "true", "secretproviderclasses.exclude.reloader.stakater.com/reload": "vault-db"});
    Kind::Deployment.create(&ns, "excluded", excluded, json!({}), mounts("vault-db")).await;

    let (ok, out, err) = explain_with(&ns, &["--enable-csi-integration"], "secretproviderclass/vault-db", &[]);
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("SecretProviderClass {}/vault-db\n", ns.name)), "{out}");
    assert!(
        out.contains("  would roll out (1), strategy env-vars:\n    Deployment web: auto: referenced via CSI volume"),
        "{out}"
    );
    assert!(out.contains("    Deployment excluded: excluded"), "{out}");
    let (ok, out, err) = explain_with(&ns, &[], "spc/vault-db", &[]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "  SecretProviderClasses are not watched (--enable-csi-integration is off): a change rolls nothing\n"
        ),
        "{out}"
    );
    assert!(out.contains("would roll out if it were watched (1)"), "{out}");

    // A namespace outside --namespaces, and a ConfigMap the resource label selector does not select.
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment.create(&ns, "api", auto, json!({}), env_from_configmap("cfg")).await;
    let (ok, out, err) = explain_with(&ns, &["--namespaces=elsewhere"], "cm/cfg", &[]);
    assert!(ok, "{err}");
    assert!(out.contains("not watched (the controller watches only elsewhere); a change rolls nothing"), "{out}");
    let (ok, out, err) = explain_with(&ns, &["--resource-label-selector=reload=yes"], "cm/cfg", &[]);
    assert!(ok, "{err}");
    assert!(
        out.contains("  its labels do not match --resource-label-selector reload=yes: a change rolls nothing\n"),
        "{out}"
    );
    let labels = json!({"metadata": {"labels": {"reload": "yes"}}});
    ns.api::<k8s_openapi::api::core::v1::ConfigMap>()
        .patch("cfg", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("label");
    let (ok, out, err) = explain_with(&ns, &["--resource-label-selector=reload=yes"], "cm/cfg", &[]);
    assert!(ok && !out.contains("its labels") && out.contains("  would roll out (1)"), "{out}{err}");
}

/// A copy of the test kubeconfig with one more context, `plugin`, whose namespace is `namespace`.
fn kubeconfig_with_context(dir: &Path, namespace: &str) -> std::path::PathBuf {
    let path = testenv::harness::kubeconfig_path();
    let mut config = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
    let current = config.current_context.clone().expect("a current context");
    let named = config.contexts.iter().find(|c| c.name == current).cloned().expect("the current context");
    let mut context = named.context.clone().expect("context body");
    context.namespace = Some(namespace.to_owned());
    config.contexts.push(kube::config::NamedContext { name: "plugin".into(), context: Some(context), ..named });
    let out = dir.join("kubeconfig");
    std::fs::write(&out, serde_json::to_string(&config).expect("serialise")).expect("write kubeconfig");
    out
}

#[tokio::test]
async fn installed_as_kubectl_reloader_it_is_a_kubectl_plugin() {
    let ns = TestNamespace::create("explain-plugin").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto, json!({}), env_from_configmap("cfg")).await;

    let dir = std::env::temp_dir().join(format!("kubectl-plugin-{}", ns.name));
    std::fs::create_dir_all(&dir).expect("dir");
    let plugin = dir.join("kubectl-reloader");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_reloader"), &plugin).expect("symlink");
    let kubeconfig = kubeconfig_with_context(&dir, &ns.name);
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let kubectl = |args: &[&str], env_kubeconfig: Option<&Path>| {
        let mut cmd = Command::new(tool("kubectl"));
        cmd.args(args).env("PATH", &path).env_remove("KUBECONFIG");
        if let Some(k) = env_kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        let out = cmd.output().expect("run kubectl");
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        (out.status.success(), text(out.stdout), text(out.stderr))
    };

    let (ok, out, err) = kubectl(&["plugin", "list"], None);
    assert!(ok && out.contains("kubectl-reloader"), "{out}{err}");
    // `--kubeconfig` and `--context` as kubectl takes them; the namespace is the context's.
    let k = kubeconfig.to_string_lossy().into_owned();
    let (ok, out, err) =
        kubectl(&["reloader", "explain", "configmap/cfg", "--kubeconfig", &k, "--context", "plugin"], None);
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("ConfigMap {}/cfg\n", ns.name)), "{out}");
    assert!(out.contains("    Deployment web: auto: referenced via envFrom; container app\n"), "{out}");
    // `$KUBECONFIG` and `-n`, the other direction, JSON.
    let (ok, out, err) =
        kubectl(&["reloader", "explain", "deploy/web", "-n", &ns.name, "-o", "json"], Some(&kubeconfig));
    assert!(ok, "{err}");
    assert_eq!(json_of(&out)["namespace"], ns.name.as_str());
    // A context that does not exist is an error naming it, not a silent fallback.
    let (ok, _, err) = kubectl(&["reloader", "explain", "cm/cfg", "--kubeconfig", &k, "--context", "nope"], None);
    assert!(!ok && err.contains("nope"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn with_key_level_reloads_a_preview_rolls_only_the_readers_of_the_keys_it_changes() {
    let ns = TestNamespace::create("explain-keys").await;
    create_configmap(&ns, "cfg", &[("a", "1"), ("b", "1")], &[]).await;
    let reads_a = json!({"containers": [{"name": "app", "image": "x",
        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}]}]});
    let opted_in = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/reload-on": "keys-used"});
    Kind::Deployment.create(&ns, "reader", opted_in, json!({}), reads_a).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&ns, "web", auto, json!({}), env_from_configmap("cfg")).await;

    let (ok, out, err) = explain_with(&ns, &[], "cm/cfg", &["--from-literal=a=1", "--from-literal=b=2"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("  new content: changed b\n  would roll out (1), strategy env-vars:\n    Deployment web:"),
        "{out}"
    );
    assert!(out.contains("    Deployment reader: the new content changes b; it reads only a\n"), "{out}");
    let (ok, out, err) = explain_with(&ns, &[], "cm/cfg", &["--from-literal=a=2", "--from-literal=b=1"]);
    assert!(ok, "{err}");
    assert!(out.contains("  would roll out (2)"), "{out}");

    let (ok, out, err) = explain_with(&ns, &[], "deployment/reader", &[]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "  ConfigMap cfg: reloads on change (auto: referenced via env valueFrom; container app; only keys a)\n"
        ),
        "{out}"
    );
    assert!(out.ends_with("  now: up to date; a controller starting now would not roll it out\n"), "{out}");
}

#[tokio::test]
async fn a_kind_the_caller_may_not_list_is_named_and_the_rest_is_answered() {
    let ns = TestNamespace::create("explain-403").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    // Everything explain reads, except StatefulSets.
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments", "daemonsets"], "verbs": ["get", "list"]},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": ["get", "list"]},
        {"apiGroups": ["argoproj.io"], "resources": ["rollouts"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps.openshift.io"], "resources": ["deploymentconfigs"], "verbs": ["get", "list"]},
    ]);
    let kubeconfig =
        common::rbac::service_account_with_rules(&ns, "viewer", rules, common::rbac::Scope::Namespace).await;
    let (ok, out, err) = explain_as(&kubeconfig, &ns, &[], "configmap/cfg", &[]);
    assert!(ok, "one forbidden kind does not withhold the answer: {err}");
    assert!(out.contains("Deployment web: auto: referenced via envFrom; container app"), "{out}");
    assert!(
        out.contains("StatefulSets could not be listed with these credentials (forbidden): not in this answer"),
        "{out}"
    );
}
