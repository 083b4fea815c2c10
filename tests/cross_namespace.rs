//! Cross-namespace references on the real control plane (issue 29, upstream stakater/Reloader#578, #335): a
//! named-list entry `<namespace>/<name>` reloads a workload when that resource of another namespace changes —
//! only with `--allow-cross-namespace-references`; without it the link is refused and `explain` says so, both
//! ways.

mod common;

use common::*;
use serde_json::json;

const ALLOW: &str = "--allow-cross-namespace-references=true";

#[tokio::test]
async fn a_namespace_slash_name_entry_reloads_from_another_namespace_only_when_allowed() {
    let shared = TestNamespace::create("xns-shared").await;
    let app = TestNamespace::create("xns-app").await;
    create_configmap(&shared, "stable-tag", &[("k", "1")], &[]).await;
    // Its own namespace's namesake must not count.
    create_configmap(&app, "stable-tag", &[("k", "local")], &[]).await;
    let named = json!({"configmap.reloader.stakater.com/reload": format!("{}/stable-tag", shared.name)});
    Kind::Deployment.create(&app, "web", named, json!({}), env_from_configmap("stable-tag")).await;
    // A workload of the shared namespace using it: its rollout shows the controller acted on each change.
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&shared, "neighbour", auto.clone(), json!({}), env_from_configmap("stable-tag")).await;
    // And one of the app namespace using the local namesake.
    Kind::Deployment.create(&app, "local-user", auto, json!({}), env_from_configmap("stable-tag")).await;
    let scope = format!("--namespaces={},{}", shared.name, app.name);

    // Refused without the flag: the change rolls the neighbour, not web; explain says why, both ways.
    let refused = Reloader::start_unscoped(&[&scope], &[]).await;
    set_configmap_data(&shared, "stable-tag", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&shared, "neighbour", 2).await;
    Kind::Deployment.stays_at_revisions(&app, "web", 1).await;
    let refusal = "cross-namespace reference refused: the controller runs without --allow-cross-namespace-references";
    let (ok, out, err) = explain_with(&app, &[], "deploy/web", &[]);
    assert!(ok && out.contains(&format!("{}/stable-tag", shared.name)) && out.contains(refusal), "{out}{err}");
    drop(refused);

    // Allowed: the change made while refused is not applied later (as for any opt-out); the next one rolls web
    // once, into its own variable, and the local namesake's change does not.
    let allowed = Reloader::start_unscoped(&[&scope, ALLOW], &[]).await;
    set_configmap_data(&shared, "stable-tag", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&app, "web", 2).await;
    let env = format!("STAKATER_{}_STABLE_TAG_CONFIGMAP", shared.name.to_uppercase().replace('-', "_"));
    let value = Kind::Deployment.env(&app, "web", "app", &env).await;
    assert_eq!(value, Some(configmap_hash(&[("k", "3")])), "{env}");
    let line = allowed.wait_log("updated 'web' of type 'Deployment'").await;
    assert!(line.contains(&format!("matched named list \"{}/stable-tag\"", shared.name)), "{line}");
    set_configmap_data(&app, "stable-tag", &[("k", "local-2")]).await;
    Kind::Deployment.wait_revisions(&app, "local-user", 2).await;
    Kind::Deployment.stays_at_revisions(&app, "web", 2).await;

    let (ok, out, err) = explain_with(&app, &[ALLOW], "deploy/web", &[]);
    assert!(ok && out.contains(&format!("matched named list \"{}/stable-tag\"", shared.name)), "{out}{err}");
    let (ok, out, err) = explain_with(&shared, &[ALLOW], "configmap/stable-tag", &[]);
    assert!(ok && out.contains(&format!("{}/web", app.name)), "the reverse direction shows the link: {out}{err}");
}
