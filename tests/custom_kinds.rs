//! Argo Rollouts and OpenShift DeploymentConfigs, served by CRDs installed into the test cluster (no
//! controller runs for them, so tests assert on the objects): every annotation mode, both strategies, Argo's
//! restart strategy, an object that does not deserialize, and an API that appears after startup.

mod common;

use common::{custom::*, *};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{DeleteParams, DynamicObject},
};
use serde_json::{Value, json};

async fn wait_field(api: &Api<DynamicObject>, name: &str, pointer: &str) -> Value {
    wait_for(&format!("{name}{pointer} to be set"), RELOAD_WAIT, || async {
        let o = api.get(name).await.map_err(|e| e.to_string())?;
        o.data
            .pointer(pointer)
            .cloned()
            .filter(|v| !v.is_null())
            .ok_or_else(|| format!("{:?}", o.data.pointer("/spec/template")))
    })
    .await
}

fn env_value(obj: &DynamicObject, env: &str) -> Option<String> {
    let containers = obj.data.pointer("/spec/template/spec/containers")?.as_array()?;
    containers.iter().flat_map(|c| c["env"].as_array().cloned().unwrap_or_default()).find(|e| e["name"] == env)?["value"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn rollouts_reload_in_every_annotation_mode_and_with_the_restart_strategy() {
    let ns = TestNamespace::create("rollouts").await;
    install_crd(&ns.client, ROLLOUT_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[("reloader.stakater.com/match", "true")]).await;
    create_secret(&ns, "sec", &[("k", "1")], &[]).await;
    let uses = json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "sec"}}]}]});
    let ar = rollouts();
    let cases = [
        ("auto", json!({"reloader.stakater.com/auto": "true"})),
        ("named", json!({"configmap.reloader.stakater.com/reload": "cf.*"})),
        ("search", json!({"reloader.stakater.com/search": "true"})),
        ("restart", json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"})),
    ];
    let mut api = None;
    for (name, annotations) in &cases {
        api = Some(create_custom(&ns, &ar, name, annotations.clone(), uses.clone()).await);
    }
    let api = api.expect("api");
    let typed =
        create_custom(&ns, &ar, "typed-secret", json!({"secret.reloader.stakater.com/auto": "true"}), uses.clone())
            .await;
    // upstream v1's spelling of the flag.
    let _reloader = Reloader::start(&ns.name, &["--is-Argo-Rollouts=true"]).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let expected = configmap_hash(&[("k", "2")]);
    for name in ["auto", "named", "search"] {
        wait_for(&format!("Rollout {name} to carry the new hash"), RELOAD_WAIT, || async {
            let o = api.get(name).await.map_err(|e| e.to_string())?;
            if env_value(&o, "STAKATER_CFG_CONFIGMAP").as_deref() == Some(expected.as_str()) {
                Ok(())
            } else {
                Err(format!("{:?}", o.data["spec"]))
            }
        })
        .await;
    }
    let restart_at = wait_field(&api, "restart", "/spec/restartAt").await;
    assert!(restart_at.as_str().is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()), "{restart_at}");
    let restarted = api.get("restart").await.expect("get");
    assert_eq!(env_value(&restarted, "STAKATER_CFG_CONFIGMAP"), None, "restart strategy: no template drift");
    let t = typed.get("typed-secret").await.expect("get");
    assert_eq!(env_value(&t, "STAKATER_CFG_CONFIGMAP"), None, "typed secret auto ignores ConfigMaps");

    set_secret_value(&ns, "sec", "k", "2").await;
    wait_for("typed-secret to reload for the Secret", RELOAD_WAIT, || async {
        let o = typed.get("typed-secret").await.map_err(|e| e.to_string())?;
        env_value(&o, "STAKATER_SEC_SECRET").map(|_| ()).ok_or_else(|| "not yet".to_owned())
    })
    .await;
}

#[tokio::test]
async fn rollouts_with_the_annotations_strategy_and_a_broken_object_alongside() {
    let ns = TestNamespace::create("rollouts-annot").await;
    install_crd(&ns.client, ROLLOUT_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let ar = rollouts();
    let api = create_custom(
        &ns,
        &ar,
        "good",
        json!({"reloader.stakater.com/auto": "true"}),
        json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
    )
    .await;
    // Accepted by the permissive CRD, but not a valid pod template.
    create_custom(
        &ns,
        &ar,
        "broken",
        json!({"reloader.stakater.com/auto": "true"}),
        json!({"containers": "not-a-list"}),
    )
    .await;
    let reloader = Reloader::start(&ns.name, &["--is-argo-rollouts", "--reload-strategy=annotations"]).await;
    reloader.wait_log("skipping an object that does not deserialize").await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let annotation =
        wait_field(&api, "good", "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from").await;
    let record: Value = serde_json::from_str(annotation.as_str().expect("string")).expect("json");
    assert_eq!(record["hash"], configmap_hash(&[("k", "2")]).as_str());
    assert_eq!(record["type"], "CONFIGMAP");
}

#[tokio::test]
async fn without_the_flag_rollouts_are_not_touched() {
    let ns = TestNamespace::create("rollouts-off").await;
    install_crd(&ns.client, ROLLOUT_CRD).await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let api = create_custom(
        &ns,
        &rollouts(),
        "web",
        json!({"reloader.stakater.com/auto": "true"}),
        json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
    )
    .await;
    Kind::Deployment
        .create(&ns, "dep", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let _reloader = Reloader::start(&ns.name, &[]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "dep", 2).await;
    let o = api.get("web").await.expect("get");
    assert_eq!(env_value(&o, "STAKATER_CFG_CONFIGMAP"), None);
}

#[tokio::test]
async fn deployment_configs_are_picked_up_when_their_api_appears() {
    let ns = TestNamespace::create("dc").await;
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let crd_name = "deploymentconfigs.apps.openshift.io";
    let _ = crds.delete(crd_name, &DeleteParams::default()).await;
    wait_for("no DeploymentConfig API", RELOAD_WAIT, || async {
        match crds.get_opt(crd_name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    // The debug line of each look for the API is the evidence that it was looked for again.
    let env =
        [("RELOADER_DISCOVERY_INTERVAL", "1s"), ("RELOADER_LOG", "info,kube_client=warn,reloader::controller=debug")];
    let reloader = Reloader::start_with_env(&ns.name, &[], &env).await;
    reloader.wait_log("API not installed; deploymentconfigs").await;
    wait_for("the API looked for again", RELOAD_WAIT, || async {
        let looks = reloader.count_log("discovery: ");
        if looks >= 3 { Ok(()) } else { Err(format!("{looks} looks")) }
    })
    .await;
    // Said once, at start, not at every look (a cluster without OpenShift would log it every interval).
    assert_eq!(reloader.count_log("API not installed; deploymentconfigs"), 1);

    install_crd(&ns.client, DC_CRD).await;
    reloader.wait_log("API found; watching deploymentconfigs").await;
    let api = create_custom(
        &ns,
        &deployment_configs(),
        "legacy",
        json!({"reloader.stakater.com/auto": "true"}),
        json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
    )
    .await;
    create_custom(
        &ns,
        &deployment_configs(),
        "named",
        json!({"configmap.reloader.stakater.com/reload": "cfg"}),
        json!({"containers": [{"name": "app", "image": "x"}]}),
    )
    .await;
    create_custom(
        &ns,
        &deployment_configs(),
        "restarted",
        json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"}),
        json!({"containers": [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
    )
    .await;
    // The controller has seen them (it records what they run with at first sight) before the change is made.
    wait_for("the DeploymentConfigs' first-sight records", RELOAD_WAIT, || async {
        for name in ["legacy", "named", "restarted"] {
            let o = api.get(name).await.map_err(|e| e.to_string())?;
            if !o.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("reloader.stakater.com/applied-hashes"))
            {
                return Err(format!("{name}: no record yet"));
            }
        }
        Ok(())
    })
    .await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    wait_for("the DeploymentConfig to carry the new hash", RELOAD_WAIT, || async {
        let o = api.get("legacy").await.map_err(|e| e.to_string())?;
        let expected = configmap_hash(&[("k", "2")]);
        if env_value(&o, "STAKATER_CFG_CONFIGMAP").as_deref() == Some(expected.as_str()) {
            Ok(())
        } else {
            Err(format!("{:?}", o.data["spec"]))
        }
    })
    .await;
    // Its own write, which may land after legacy's.
    wait_for("the named-list DeploymentConfig's first container to carry the new hash", RELOAD_WAIT, || async {
        let named = api.get("named").await.map_err(|e| e.to_string())?;
        let value = env_value(&named, "STAKATER_CFG_CONFIGMAP");
        if value == Some(configmap_hash(&[("k", "2")])) { Ok(()) } else { Err(format!("{value:?}")) }
    })
    .await;
    // The restart strategy on a kind without `spec.restartAt`: `kubectl rollout restart`'s mark in the template.
    wait_for("the restarted DeploymentConfig's restartedAt", RELOAD_WAIT, || async {
        let o = api.get("restarted").await.map_err(|e| e.to_string())?;
        let mark = o.data.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt");
        if mark.is_some() { Ok(()) } else { Err(format!("{:?}", o.data["spec"]["template"]["metadata"])) }
    })
    .await;
    let restarted = api.get("restarted").await.expect("get");
    assert_eq!(env_value(&restarted, "STAKATER_CFG_CONFIGMAP"), None, "no env var with the restart strategy");
    let _ = crds.delete(crd_name, &DeleteParams::default()).await;
}
