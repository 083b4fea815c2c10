//! Workload kinds added by configuration (`--workload-kind`, issue 29) on the real control plane, with the projects'
//! real CRDs (tests/crds: OpenKruise v1.8.4's CloneSet, Advanced StatefulSet and DaemonSet, Knative Serving
//! v1.23.0's Service; no controller of theirs runs, so tests assert on the objects): objects written as users write
//! them reload with both reload strategies and the restart strategy, and a Knative template that names its revision
//! gets a new name; a kind whose API is not installed holds nothing back.

mod common;

use std::time::Duration;

use common::{custom::*, *};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, PostParams},
};
use serde_json::{Value, json};

const APPLIED: &str = "reloader.stakater.com/applied-hashes";

fn knative_services() -> ApiResource {
    resource("serving.knative.dev", "v1", "Service", "services")
}

/// Waits until `pointer` of `name` satisfies `check`, and returns the object.
async fn wait_object(api: &Api<DynamicObject>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(&format!("{name}: {what}"), RELOAD_WAIT, || async {
        let o = api.get(name).await.map_err(|e| e.to_string())?;
        let value = serde_json::to_value(&o).map_err(|e| e.to_string())?;
        if check(&value) { Ok(value) } else { Err(format!("{}", value["spec"]["template"])) }
    })
    .await
}

fn env_of(object: &Value, env: &str) -> Option<String> {
    let containers = object.pointer("/spec/template/spec/containers")?.as_array()?;
    let all = containers.iter().flat_map(|c| c["env"].as_array().cloned().unwrap_or_default());
    all.into_iter().find(|e| e["name"] == env)?["value"].as_str().map(str::to_owned)
}

fn recorded(object: &Value, hash: &str) -> bool {
    object["metadata"]["annotations"][APPLIED].as_str().is_some_and(|r| r.contains(hash))
}

#[tokio::test]
async fn a_kruise_cloneset_reloads_with_env_vars_and_with_the_restart_strategy() {
    let ns = TestNamespace::create("cloneset").await;
    install_yaml_crd(&ns.client, CLONESET_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let uses =
        json!({"containers": [{"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let api = create_custom(&ns, &clonesets(), "web", auto, uses.clone()).await;
    let restart = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"});
    create_custom(&ns, &clonesets(), "restarted", restart, uses).await;
    // A kind whose API is not installed is reported and waited for; it holds nothing else back.
    let flags = ["--workload-kind=kruise-cloneset", "--workload-kind=example.com/v1/Widget"];
    let reloader = Reloader::start(&ns.name, &flags).await;
    reloader.wait_log("API not installed; widgets are not reloaded until it appears").await;
    let v1 = configmap_hash(&[("k", "1")]);
    for name in ["web", "restarted"] {
        wait_object(&api, name, "first-sight record", |o| recorded(o, &v1)).await;
    }

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let v2 = configmap_hash(&[("k", "2")]);
    let web = wait_object(&api, "web", "the new hash in its template", |o| {
        env_of(o, "STAKATER_CFG_CONFIGMAP").as_deref() == Some(v2.as_str())
    })
    .await;
    assert_eq!(web["spec"]["template"]["spec"]["containers"][0]["image"], "nginx", "the rest of the template is kept");
    let line = reloader.wait_log("updated 'web' of type 'CloneSet'").await;
    assert!(line.contains("rollout_strategy=rollout"), "{line}");
    let restarted = wait_object(&api, "restarted", "restartedAt and the record", |o| {
        o.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt").is_some()
            && recorded(o, &v2)
    })
    .await;
    assert_eq!(env_of(&restarted, "STAKATER_CFG_CONFIGMAP"), None, "restart writes only kubectl's mark");
    reloader.wait_log("updated 'restarted' of type 'CloneSet'").await;

    let flags = ["--workload-kind=kruise-cloneset"];
    let (ok, out, err) = explain_with(&ns, &flags, "cloneset/web", &[]);
    assert!(ok && out.contains("auto: referenced via envFrom"), "{out}{err}");
    let (ok, out, err) = explain_with(&ns, &flags, "clonesets.apps.kruise.io/web", &[]);
    assert!(ok && out.contains("auto: referenced via envFrom"), "{out}{err}");
    // Without the flag (issue 40): discovery finds the kind and names it by its preset, as the controller would.
    for target in ["cloneset/web", "clonesets.apps.kruise.io/web"] {
        let (ok, out, err) = explain_with(&ns, &[], target, &[]);
        assert!(ok && out.contains("auto: referenced via envFrom"), "{target}: {out}{err}");
    }
    let (ok, out, err) = explain_with(&ns, &[], "widget/web", &[]);
    assert!(!ok && err.contains("is not <kind>/<name>"), "a kind no API serves: {out}{err}");
}

#[tokio::test]
async fn a_knative_service_reloads_with_annotations_and_restart_and_a_named_revision_gets_a_new_name() {
    let ns = TestNamespace::create("kservice").await;
    install_yaml_crd(&ns.client, KNATIVE_SERVICE_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let ar = knative_services();
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &ar);
    // As Knative's docs write one: no container name, a revision named by the user.
    let service = |name: &str, revision: Option<&str>| {
        let mut template = json!({"spec": {"containers": [{"image": "ghcr.io/knative/helloworld-go:latest",
            "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}});
        if let Some(revision) = revision {
            template["metadata"] = json!({"name": revision});
        }
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": name, "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"template": template}
        }))
        .expect("service")
    };
    for (name, revision) in [("hello", Some("hello-v1")), ("plain", None), ("restarted", Some("restarted-v1"))] {
        let mut object = service(name, revision);
        if name == "restarted" {
            object
                .metadata
                .annotations
                .get_or_insert_default()
                .insert("reloader.stakater.com/rollout-strategy".into(), "restart".into());
        }
        api.create(&PostParams::default(), &object).await.expect("create service");
    }
    let flags = ["--workload-kind=knative-service", "--reload-strategy=annotations"];
    let reloader = Reloader::start(&ns.name, &flags).await;
    let v1 = configmap_hash(&[("k", "1")]);
    for name in ["hello", "plain"] {
        wait_object(&api, name, "first-sight record", |o| recorded(o, &v1)).await;
    }

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let v2 = configmap_hash(&[("k", "2")]);
    let reloaded = |o: &Value| {
        let mark = o.pointer("/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from");
        mark.and_then(Value::as_str).is_some_and(|m| m.contains(&v2))
    };
    let hello = wait_object(&api, "hello", "the reload mark", reloaded).await;
    let revision = hello["spec"]["template"]["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    assert!(revision.starts_with("hello-") && revision != "hello-v1", "a new revision name: {revision}");
    assert!(hello["spec"]["template"]["spec"]["containers"][0].get("name").is_none(), "no name is added");
    let plain = wait_object(&api, "plain", "the reload mark", reloaded).await;
    assert!(plain["spec"]["template"]["metadata"].get("name").is_none(), "Knative names unnamed revisions");
    let restarted = wait_object(&api, "restarted", "kubectl's restart mark", |o| {
        o.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt").is_some()
    })
    .await;
    let revision = restarted["spec"]["template"]["metadata"]["name"].as_str().unwrap_or_default();
    assert!(revision.starts_with("restarted-") && revision != "restarted-v1", "a new revision name: {revision}");
    let mark = restarted.pointer("/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from");
    assert_eq!(mark, None, "restart writes only kubectl's mark");
    reloader.wait_log("updated 'hello' of type 'Service'").await;
}

/// The Kruise presets for Advanced StatefulSets and Advanced DaemonSets, given as a Deployment's environment gives
/// them (`RELOADER_WORKLOAD_KINDS`, comma-separated): each reloads, beside the built-in kinds of the same name.
#[tokio::test]
async fn kruise_advanced_statefulsets_and_daemonsets_reload_through_presets_from_the_environment() {
    let ns = TestNamespace::create("kruise-presets").await;
    install_yaml_crd(&ns.client, KRUISE_STATEFULSET_CRD).await;
    install_yaml_crd(&ns.client, KRUISE_DAEMONSET_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let uses =
        json!({"containers": [{"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let advanced_sets = resource("apps.kruise.io", "v1beta1", "StatefulSet", "statefulsets");
    let sets = create_custom(&ns, &advanced_sets, "db", auto.clone(), uses.clone()).await;
    let advanced_daemons = resource("apps.kruise.io", "v1alpha1", "DaemonSet", "daemonsets");
    let daemons = create_custom(&ns, &advanced_daemons, "agent", auto, uses).await;
    let env = [("RELOADER_WORKLOAD_KINDS", "kruise-statefulset,kruise-daemonset")];
    let reloader = Reloader::start_with_env(&ns.name, &[], &env).await;
    let v1 = configmap_hash(&[("k", "1")]);
    wait_object(&sets, "db", "first-sight record", |o| recorded(o, &v1)).await;
    wait_object(&daemons, "agent", "first-sight record", |o| recorded(o, &v1)).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let v2 = configmap_hash(&[("k", "2")]);
    for (api, name) in [(&sets, "db"), (&daemons, "agent")] {
        wait_object(api, name, "the new hash in its template", |o| {
            env_of(o, "STAKATER_CFG_CONFIGMAP").as_deref() == Some(v2.as_str())
        })
        .await;
    }
    reloader.wait_log("updated 'db' of type 'StatefulSet'").await;
    reloader.wait_log("updated 'agent' of type 'DaemonSet'").await;
}

/// The other reload strategy for each: annotations for a CloneSet, env vars for a Knative Service (whose container
/// has no name).
#[tokio::test]
async fn each_configured_kind_reloads_with_the_other_reload_strategy_too() {
    let ns = TestNamespace::create("configured-strategies").await;
    install_yaml_crd(&ns.client, CLONESET_CRD).await;
    install_yaml_crd(&ns.client, KNATIVE_SERVICE_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let env_from = json!([{"configMapRef": {"name": "cfg"}}]);
    let uses = json!({"containers": [{"name": "app", "image": "nginx", "envFrom": env_from}]});
    let auto = json!({"reloader.stakater.com/auto": "true"});
    let clones = create_custom(&ns, &clonesets(), "web", auto.clone(), uses).await;
    let services: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &knative_services());
    let service = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "hello", "annotations": auto},
        "spec": {"template": {"spec": {"containers": [{"image": "x", "envFrom": env_from}]}}}
    }))
    .expect("service");
    services.create(&PostParams::default(), &service).await.expect("create service");
    let v1 = configmap_hash(&[("k", "1")]);
    let v2 = configmap_hash(&[("k", "2")]);

    let clone_flags = ["--workload-kind=kruise-cloneset", "--reload-strategy=annotations"];
    let reloader = Reloader::start(&ns.name, &clone_flags).await;
    wait_object(&clones, "web", "first-sight record", |o| recorded(o, &v1)).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_object(&clones, "web", "the reload mark", |o| {
        let mark = o.pointer("/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from");
        mark.and_then(Value::as_str).is_some_and(|m| m.contains(&v2))
    })
    .await;
    drop(reloader);

    let _reloader = Reloader::start(&ns.name, &["--workload-kind=knative-service"]).await;
    wait_object(&services, "hello", "first-sight record", |o| recorded(o, &v2)).await;
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    let v3 = configmap_hash(&[("k", "3")]);
    let hello = wait_object(&services, "hello", "the new hash in the unnamed container", |o| {
        env_of(o, "STAKATER_CFG_CONFIGMAP").as_deref() == Some(v3.as_str())
    })
    .await;
    assert!(hello["spec"]["template"]["spec"]["containers"][0].get("name").is_none(), "no name is added");
}

/// A kind without a pod template (`--workload-kind …=-`): a StrimziPodSet lists its pods itself and its operator
/// reverts anything else, so what its pods use stands for its references and its pods are evicted. No operator
/// runs here: the pods are created as its operator would create them (controlled by the set), and so are their
/// replacements — late. Neither its spec nor its status says how many pods it should have, so the first step
/// records the count with the boundary; the first pod evicted, nothing replaces it and the restarts stop there
/// (issue 38, finding 1: both pods were evicted), until its replacement comes.
#[tokio::test]
async fn a_strimzi_pod_set_without_a_template_has_its_pods_evicted_for_what_they_use() {
    let ns = TestNamespace::create("podset").await;
    install_yaml_crd(&ns.client, STRIMZI_POD_SET_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let labels = json!({"strimzi.io/cluster": "kafka", "strimzi.io/pool-name": "brokers"});
    let pod = |name: &str, owner: &Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels, "ownerReferences": owner},
               "spec": {"containers": [{"name": "kafka", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}})
    };
    let sets: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &resource("core.strimzi.io", "v1beta2", "StrimziPodSet", "strimzipodsets"),
    );
    let set = serde_json::from_value::<DynamicObject>(json!({
        "apiVersion": "core.strimzi.io/v1beta2", "kind": "StrimziPodSet",
        "metadata": {"name": "kafka-brokers", "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"selector": {"matchLabels": labels},
                 "pods": [pod("kafka-brokers-0", &json!([])), pod("kafka-brokers-1", &json!([]))]}
    }))
    .expect("podset");
    let uid = sets.create(&PostParams::default(), &set).await.expect("create podset").metadata.uid;
    let owner = json!([{"apiVersion": "core.strimzi.io/v1beta2", "kind": "StrimziPodSet", "name": "kafka-brokers",
                        "uid": uid, "controller": true}]);
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let create_pod = |name: &'static str| {
        let (pods, p) = (pods.clone(), pod(name, &owner));
        async move {
            // The operator creates a pod again under its name once the evicted one is gone.
            wait_for(&format!("pod {name} created"), RELOAD_WAIT, || async {
                let p = serde_json::from_value(p.clone()).map_err(|e| e.to_string())?;
                pods.create(&PostParams::default(), &p).await.map(|_| ()).map_err(|e| e.to_string())
            })
            .await;
        }
    };
    for name in ["kafka-brokers-0", "kafka-brokers-1"] {
        create_pod(name).await;
    }
    let kinds = "--workload-kind=core.strimzi.io/v1beta2/StrimziPodSet=-";
    let reloader = Reloader::start(&ns.name, &[kinds, "--rollout-timeout=2s"]).await;
    // Its first-sight record holds the ConfigMap its pods use: their references were read.
    let v1 = configmap_hash(&[("k", "1")]);
    wait_object(&sets, "kafka-brokers", "first-sight record of what its pods use", |o| recorded(o, &v1)).await;
    let before = sets.get("kafka-brokers").await.expect("podset").data["spec"].clone();
    // explain reads the pods as the controller does (before they are restarted).
    let (ok, out, err) = explain_with(&ns, &[kinds], "strimzipodset/kafka-brokers", &[]);
    assert!(ok && out.contains("auto: referenced via envFrom"), "{out}{err}");

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let line = reloader.wait_log("updated 'kafka-brokers' of type 'StrimziPodSet'").await;
    assert!(line.contains("rollout_strategy=evict-pods"), "{line}");
    let stalled = reloader.wait_log("are not restarted: none restarted for 2s").await;
    assert!(stalled.contains("1 of 2 pods exist"), "{stalled}");
    assert_eq!(reloader.count_log("evicted pod kafka-brokers-"), 1, "{:#?}", reloader.logs());
    let boundary = sets.get("kafka-brokers").await.expect("podset").metadata.annotations.unwrap_or_default();
    let boundary = &boundary["reloader.stakater.com/restart-pods-created-before"];
    assert!(boundary.ends_with(";pods=2"), "the count recorded at the first step: {boundary}");

    create_pod("kafka-brokers-0").await;
    assert!(
        reloader.has_log_within("restarted every pod of StrimziPodSet 'kafka-brokers'", Duration::from_secs(90)).await,
        "{:#?}",
        reloader.logs()
    );
    assert_eq!(reloader.count_log("evicted pod kafka-brokers-"), 2);
    let after = sets.get("kafka-brokers").await.expect("podset").data["spec"].clone();
    assert_eq!(after, before, "its spec is never written");
}

/// A configured kind takes part in rollout waves through its preset's status rule: a Deployment of wave 1 waits
/// until a CloneSet of wave 0, written first, reports its rollout complete (no Kruise controller runs here: its
/// status is written as Kruise's would be, through the status subresource).
#[tokio::test]
async fn a_cloneset_in_a_lower_wave_holds_a_higher_one_until_its_status_says_complete() {
    let ns = TestNamespace::create("cloneset-waves").await;
    install_yaml_crd(&ns.client, CLONESET_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let uses =
        json!({"containers": [{"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    let wave = |n: &str| json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-wave": n});
    let api = create_custom(&ns, &clonesets(), "first", wave("0"), uses).await;
    Kind::Deployment.create(&ns, "second", wave("1"), json!({}), env_from_configmap("cfg")).await;
    let reloader = Reloader::start(&ns.name, &["--workload-kind=kruise-cloneset"]).await;
    let v1 = configmap_hash(&[("k", "1")]);
    wait_object(&api, "first", "first-sight record", |o| recorded(o, &v1)).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let v2 = configmap_hash(&[("k", "2")]);
    let first = wait_object(&api, "first", "the new hash in its template", |o| {
        env_of(o, "STAKATER_CFG_CONFIGMAP").as_deref() == Some(v2.as_str())
    })
    .await;
    reloader.wait_log("waits: wave 1: waits for CloneSet").await;
    assert_eq!(Kind::Deployment.revisions(&ns, "second").await, 1, "wave 1 waits for the CloneSet");

    let generation = first["metadata"]["generation"].as_i64().expect("generation");
    let status = json!({"status": {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                                   "readyReplicas": 1, "availableReplicas": 1, "updatedReadyReplicas": 1}});
    let patch = kube::api::Patch::Merge(&status);
    api.patch_status("first", &kube::api::PatchParams::default(), &patch).await.expect("CloneSet status");
    Kind::Deployment.wait_revisions(&ns, "second", 2).await;
    let second = Kind::Deployment.env(&ns, "second", "app", "STAKATER_CFG_CONFIGMAP").await;
    assert_eq!(second, Some(v2));
}
