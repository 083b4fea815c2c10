//! Failure handling on the real control plane: a rejected patch is reported once with the workload, the
//! resource and the API's message, is not retried, and the next change still reloads; patches throttled by the
//! API server (429) still land, once each.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    apps::v1::Deployment,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

/// Denies updates that add a STAKATER_* env var to Deployments labelled `frozen` in one namespace.
async fn freeze_policy(ns: &TestNamespace) -> impl Drop {
    let name = format!("freeze-{}", ns.name);
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments"]}]},
            "validations": [{
                "expression": "!(has(object.metadata.labels) && 'frozen' in object.metadata.labels) || !object.spec.template.spec.containers.exists(c, has(c.env) && c.env.exists(e, e.name.startsWith('STAKATER_')))",
                "message": "deployment is frozen"
            }]
        }
    }))
    .expect("policy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}}}}
    }))
    .expect("binding");
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(ns.client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(ns.client.clone());
    policies.create(&PostParams::default(), &policy).await.expect("create policy");
    bindings.create(&PostParams::default(), &binding).await.expect("create binding");
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let name = self.0.clone();
            testenv::harness::cleanup_from_drop(move |client| async move {
                let _ = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await;
                let _ = Api::<ValidatingAdmissionPolicy>::all(client).delete(&name, &DeleteParams::default()).await;
            });
        }
    }
    Cleanup(name)
}

#[tokio::test]
async fn a_rejected_patch_is_reported_once_and_the_next_change_still_reloads() {
    let ns = TestNamespace::create("rejected").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let deployments = api::<Deployment>(&ns);
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"labels": {"frozen": "yes"}}})))
        .await
        .expect("label");
    let _policy = freeze_policy(&ns).await;
    // The policy takes effect asynchronously: wait until a dry-run of the same kind of change is denied.
    let probe = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_PROBE", "value": "x"}]}]}}}});
    wait_for("the admission policy to deny STAKATER_* updates", Duration::from_secs(30), || async {
        match deployments.patch("web", &PatchParams::default().dry_run(), &Patch::Strategic(&probe)).await {
            Err(kube::Error::Api(s)) if s.message.contains("frozen") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 1).await;

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let line = reloader.wait_log("not retrying").await;
    for part in ["web", "ConfigMap", "cfg", "deployment is frozen"] {
        assert!(line.contains(part), "{part:?} missing from {line:?}");
    }
    Kind::Deployment.stays_at_revisions(&ns, "web", 1).await;
    assert_eq!(reloader.count_log("not retrying"), 1, "a permanent error is logged once, not retried");
    let events = ns.api::<k8s_openapi::api::events::v1::Event>().list(&Default::default()).await.expect("events");
    let failed: Vec<_> = events.items.iter().filter(|e| e.reason.as_deref() == Some("ReloadFail")).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    let note = failed[0].note.clone().unwrap_or_default();
    assert!(
        note.starts_with("Update for 'web' of type 'Deployment'") && note.contains("deployment is frozen"),
        "{note}"
    );

    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"labels": {"frozen": null}}})))
        .await
        .expect("unfreeze");
    set_configmap_data(&ns, "cfg", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    assert_eq!(
        Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await,
        Some(configmap_hash(&[("k", "3")]))
    );
}

#[tokio::test]
async fn one_workload_with_bad_annotations_does_not_stop_the_others() {
    let ns = TestNamespace::create("bad-neighbour").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let bad = json!({"configmap.reloader.stakater.com/reload": "([", "reloader.stakater.com/auto": "maybe"});
    Kind::Deployment.create(&ns, "bad", bad, json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment
        .create(&ns, "good", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let regex_line = reloader.wait_log("invalid regex").await;
    assert!(regex_line.contains("workload=bad") && regex_line.contains("(["), "{regex_line}");
    let auto_line = reloader.wait_log("value=maybe").await;
    assert!(auto_line.contains("reloader.stakater.com/auto"), "{auto_line}");

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "good", 2).await;
    Kind::Deployment.stays_at_revisions(&ns, "bad", 1).await;
}

#[tokio::test]
async fn names_that_share_an_env_var_are_reported_and_still_reload() {
    let ns = TestNamespace::create("env-collision").await;
    create_configmap(&ns, "a-b", &[("k", "1")], &[]).await;
    create_configmap(&ns, "a.b", &[("k", "1")], &[]).await;
    let spec = json!({"containers": [{"name": "app", "image": "x",
        "envFrom": [{"configMapRef": {"name": "a-b"}}, {"configMapRef": {"name": "a.b"}}]}]});
    Kind::Deployment.create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), spec).await;
    let reloader = Reloader::start(&ns.name, &[]).await;
    let line = reloader.wait_log("share the env var name").await;
    assert!(line.contains("STAKATER_A_B_CONFIGMAP") && line.contains("a-b, a.b"), "{line}");
    set_configmap_data(&ns, "a.b", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    // The shared variable must not make the two resources undo each other's value in a loop.
    Kind::Deployment.stays_at_revisions(&ns, "web", 2).await;
    assert_eq!(reloader.count_log("updated 'web'"), 1);
}

/// API Priority and Fairness throttling the controller: its Deployment PATCHes go to a priority level with no
/// seats of its own, so a PATCH sent while another runs is rejected with 429, `Retry-After: 1` and a plain-text
/// body. The controller (as a ServiceAccount only that level serves) must still reload every Deployment exactly
/// once. With the defaults there is no client-side write limit (issue 39): the four workers write at once and the
/// API server's 429s are what slows them down. (The client retries a 429 after its `Retry-After`, briefly,
/// `src/client/retry.rs`; then the work queue.)
#[tokio::test]
async fn throttled_writes_all_land_once() {
    let ns = TestNamespace::create("throttled").await;
    let client = ns.client.clone();
    let read = ["get", "list", "watch"];
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": read},
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": read},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
    ]);
    let kubeconfig = rbac::service_account_with_rules(&ns, "reloader", rules, rbac::Scope::Namespace).await;
    let level = format!("throttled-{}", ns.name);
    let objects = [
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": {"name": level},
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "lendablePercent": 0,
                        "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}}),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": level},
               "spec": {"matchingPrecedence": 100, "priorityLevelConfiguration": {"name": level},
                        "distinguisherMethod": {"type": "ByUser"},
                        "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                 "serviceAccount": {"name": "reloader", "namespace": ns.name}}],
                                   "resourceRules": [{"verbs": ["patch"], "apiGroups": ["apps"],
                                                      "resources": ["deployments"], "namespaces": [ns.name]}]}]}}),
    ];
    chart::apply(&client, &objects).await;
    // The API server's flow-control configuration has taken the schema in once it has written its status.
    let schema = chart::api_for(&client, &objects[1]).await;
    wait_for("the FlowSchema in effect", RELOAD_WAIT, || async {
        let s = schema.get(&level).await.map_err(|e| e.to_string())?;
        let conditions = s.data["status"]["conditions"].as_array().map_or(0, Vec::len);
        if conditions > 0 { Ok(()) } else { Err("no status yet".to_owned()) }
    })
    .await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    let names: Vec<String> = (0..8).map(|i| format!("web-{i}")).collect();
    for name in &names {
        let auto = json!({"reloader.stakater.com/auto": "true"});
        Kind::Deployment.create(&ns, name, auto, json!({}), env_from_configmap("cfg")).await;
    }
    // Other clients of the same level keep it busy for 4 s after the change: 8 loops of `kubectl patch` as the
    // same ServiceAccount. The level runs one request at a time, so the controller's PATCHes meet it full
    // whatever their timing (it writes one first-sight record at a time, and its reloads come a few ms apart).
    Kind::Deployment.create(&ns, "noise", json!({}), json!({}), plain_pod()).await;
    let reloader = Reloader::start_with_env(&ns.name, &[], &[("KUBECONFIG", &kubeconfig.display().to_string())]).await;
    let until = std::time::Instant::now() + Duration::from_secs(4);
    let noise: Vec<_> = (0..8)
        .map(|loop_id| {
            let (kubectl, kubeconfig, namespace) = (chart::tool("kubectl"), kubeconfig.clone(), ns.name.clone());
            std::thread::spawn(move || {
                while std::time::Instant::now() < until {
                    let patch = json!({"metadata": {"annotations": {format!("noise-{loop_id}"): format!("{:?}", std::time::Instant::now())}}});
                    let _ = std::process::Command::new(&kubectl)
                        .args(["-n", &namespace, "patch", "deployment", "noise", "--type=merge", "-p", &patch.to_string()])
                        .env("KUBECONFIG", &kubeconfig)
                        .output();
                }
            })
        })
        .collect();

    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let hash = configmap_hash(&[("k", "2")]);
    wait_for("every Deployment reloaded", Duration::from_secs(60), || async {
        let mut behind = Vec::new();
        for name in &names {
            if Kind::Deployment.env(&ns, name, "app", "STAKATER_CFG_CONFIGMAP").await.as_deref() != Some(hash.as_str())
            {
                behind.push(name.clone());
            }
        }
        if behind.is_empty() { Ok(()) } else { Err(format!("not yet: {behind:?}")) }
    })
    .await;
    // One rollout each, and no second one afterwards (a throttled write retried into a duplicate).
    for name in &names {
        Kind::Deployment.wait_revisions(&ns, name, 2).await;
    }
    holds_for("every Deployment at 2 revisions", QUIET_PERIOD, || async {
        for name in &names {
            let got = Kind::Deployment.revisions(&ns, name).await;
            if got != 2 {
                return Err(format!("{name}: {got} revisions"));
            }
        }
        Ok(())
    })
    .await;
    for loop_thread in noise {
        loop_thread.join().expect("a kubectl loop");
    }
    // The API server answered some of the controller's own PATCHes 429 (so the case tested what it says).
    let metrics = reloader.metrics().await;
    let throttled: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && l.contains("code=\"429\"") && l.contains("PATCH"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(throttled > 0.0, "no PATCH was throttled, so nothing was tested:\n{}", reloader.logs().join("\n"));
    for object in &objects {
        let _ = chart::api_for(&client, object).await.delete(&level, &DeleteParams::default()).await;
    }
}
