//! Cross-namespace references on the real control plane (issue 29, upstream stakater/Reloader#578, #335): a
//! named-list entry `<namespace>/<name>` reloads a workload when that resource of another namespace changes —
//! only with `--allow-cross-namespace-references` and the resource's consent; without them the link is refused,
//! leaves no trace on the workload, and `explain` says so, both ways (issue 38). Gates never cross namespaces.

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Secret};
use kube::api::{Patch, PatchParams};
use serde_json::json;

const ALLOW: &str = "--allow-cross-namespace-references=true";

#[tokio::test]
async fn a_namespace_slash_name_entry_reloads_from_another_namespace_only_when_allowed() {
    let shared = TestNamespace::create("xns-shared").await;
    let app = TestNamespace::create("xns-app").await;
    // It consents to be named from the app namespace: with the flag, that makes the reference allowed.
    create_configmap(&shared, "stable-tag", &[("k", "1")], &[(CONSENT, &app.name)]).await;
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

const APPLIED: &str = "reloader.stakater.com/applied-hashes";
/// The annotation by which a resource consents to be named from other namespaces.
const CONSENT: &str = "reloader.stakater.com/allow-references-from";

/// A Deployment's metadata annotations: everything the controller may write on it besides its template.
async fn annotations(ns: &TestNamespace, name: &str) -> BTreeMap<String, String> {
    api::<Deployment>(ns).get(name).await.expect("deployment").metadata.annotations.unwrap_or_default()
}

/// Waits until a Deployment's `applied-hashes` record contains `needle`, and returns the record.
async fn wait_record(ns: &TestNamespace, name: &str, needle: &str) -> String {
    wait_for(&format!("{name}'s record to contain {needle:?}"), RELOAD_WAIT, || async {
        let record = annotations(ns, name).await.remove(APPLIED).unwrap_or_default();
        if record.contains(needle) { Ok(record) } else { Err(record) }
    })
    .await
}

/// Asserts, for the quiet period, that a Deployment's annotations stay exactly `expected` and that it does not
/// roll.
async fn stays_as(ns: &TestNamespace, name: &str, expected: &BTreeMap<String, String>) {
    holds_for(&format!("{name}'s annotations to stay as they were"), QUIET_PERIOD, || async {
        let now = annotations(ns, name).await;
        if now == *expected { Ok(()) } else { Err(format!("{now:#?}")) }
    })
    .await;
    Kind::Deployment.stays_at_revisions(ns, name, 1).await;
}

/// Issue 38, finding 3: with the flag off (the default), a tenant naming `<other namespace>/<name>` and planting a
/// record entry for it learns nothing — its Deployment is the same whether that resource exists or not, changes,
/// is deleted or comes back; a regex across namespaces is refused too; `explain` says refused.
#[tokio::test]
async fn with_the_flag_off_a_tenant_naming_another_namespace_learns_nothing_of_it() {
    let target = TestNamespace::create("xns-target").await;
    let tenant = TestNamespace::create("xns-tenant").await;
    create_configmap(&target, "cfg", &[("k", "1")], &[]).await;
    create_configmap(&tenant, "own", &[("k", "own")], &[]).await;
    // A workload of the target namespace using cfg: its rollouts show the controller processed each change of cfg.
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&target, "neighbour", auto, json!({}), env_from_configmap("cfg")).await;
    // Two tenants, each naming a resource of the target namespace (exactly, and by a regex) and planting a record
    // entry for it: `probe` names one that exists, `control` one that never does.
    let planted = configmap_hash(&[("k", "planted")]);
    for (name, named) in [("probe", "cfg"), ("control", "absent")] {
        let meta = json!({
            "reloader.stakater.com/auto": "true",
            "configmap.reloader.stakater.com/reload": format!("{0}/{named},{0}/{named}.*", target.name),
            APPLIED: format!("{{\"configmap/{}/{named}\":\"{planted}\"}}", target.name),
        });
        Kind::Deployment.create(&tenant, name, meta, json!({}), env_from_configmap("own")).await;
    }
    let scope = format!("--namespaces={},{}", target.name, tenant.name);
    let reloader = Reloader::start_unscoped(&[&scope, "--reload-on-delete=true"], &[]).await;

    // Both tenants processed (their own ConfigMap recorded): the same record, whether the named resource exists.
    let probe = wait_record(&tenant, "probe", "configmap/own").await;
    let control = wait_record(&tenant, "control", "configmap/own").await;
    assert_eq!(probe, control, "the record tells whether {}/cfg exists", target.name);
    assert!(!probe.contains(&configmap_hash(&[("k", "1")])), "cfg's hash on the tenant: {probe}");
    let before = annotations(&tenant, "probe").await;
    let regex = format!("\"{}/cfg.*\"", target.name);
    let refusal = reloader.wait_log(&format!("{regex} in annotation")).await;
    assert!(refusal.contains("refused"), "{refusal}");

    // Changed, deleted, re-created: the neighbour is updated each time (the controller processed that change of
    // cfg; its log line says so — a deletion takes the template back to an earlier ReplicaSet); the probe's
    // Deployment stays byte-for-byte as it was.
    let neighbour_updated = |n: usize| {
        let line = format!(
            "Changes detected in 'cfg' of type 'CONFIGMAP' in namespace '{}'; updated 'neighbour'",
            target.name
        );
        let reloader = &reloader;
        async move {
            wait_for(&format!("{n} update(s) of the neighbour"), RELOAD_WAIT, || async {
                let seen = reloader.count_log(&line);
                if seen >= n { Ok(()) } else { Err(format!("{seen}")) }
            })
            .await
        }
    };
    set_configmap_data(&target, "cfg", &[("k", "2")]).await;
    neighbour_updated(1).await;
    stays_as(&tenant, "probe", &before).await;
    delete_configmap(&target, "cfg").await;
    neighbour_updated(2).await;
    stays_as(&tenant, "probe", &before).await;
    create_configmap(&target, "cfg", &[("k", "3")], &[]).await;
    neighbour_updated(3).await;
    stays_as(&tenant, "probe", &before).await;

    let (ok, out, err) = explain_with(&tenant, &[], "deploy/probe", &[]);
    let refused = format!(
        "ConfigMap {}/cfg: does not reload (cross-namespace reference refused: the controller runs without \
         --allow-cross-namespace-references)",
        target.name
    );
    assert!(ok && out.contains(&refused), "{out}{err}");
    assert!(out.contains(&format!("problem: entry {regex}")), "{out}");
}

/// Issue 38, finding 4: rollout gates never cross namespaces — a tenant's paused wave-0 workload naming a resource
/// of another namespace (allowed, with that resource's consent) does not hold that namespace's wave-1 workload.
#[tokio::test]
async fn a_tenants_paused_wave_zero_does_not_hold_another_namespaces_wave_one() {
    let target = TestNamespace::create("xns-gated").await;
    let tenant = TestNamespace::create("xns-holder").await;
    create_configmap(&target, "cfg", &[("k", "1")], &[(CONSENT, &tenant.name)]).await;
    let api_meta = json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-wave": "1"});
    Kind::Deployment.create(&target, "api", api_meta, json!({}), env_from_configmap("cfg")).await;
    let evil = json!({
        "configmap.reloader.stakater.com/reload": format!("{}/cfg", target.name),
        "reloader.stakater.com/pause": "true",
        "reloader.stakater.com/rollout-wave": "0",
    });
    Kind::Deployment.create(&tenant, "evil", evil, json!({}), plain_pod()).await;
    let scope = format!("--namespaces={},{}", target.name, tenant.name);
    let reloader = Reloader::start_unscoped(&[&scope, ALLOW], &[]).await;
    Kind::Deployment.wait_recorded(&tenant, "evil").await;
    Kind::Deployment.wait_recorded(&target, "api").await;

    set_configmap_data(&target, "cfg", &[("k", "2")]).await;
    // evil wants the change and waits (paused): it is a live reference; api rolls all the same.
    reloader.wait_log("'evil' in namespace").await;
    assert!(reloader.wait_log("'evil' in namespace").await.contains("waits: paused"), "{:#?}", reloader.logs());
    Kind::Deployment.wait_revisions(&target, "api", 2).await;
    assert_eq!(reloader.count_log("/evil (wave 0)"), 0, "{:#?}", reloader.logs());
    Kind::Deployment.stays_at_revisions(&tenant, "evil", 1).await;
}

/// Issue 38: with the flag on, the resource consents (`reloader.stakater.com/allow-references-from`). Without it a
/// reference is refused exactly as with the flag off (nothing rolls, nothing is recorded); with it the workload
/// rolls — a Secret's value keyed (HMAC under the Secret's UID), never its plain SHA-1.
#[tokio::test]
async fn another_namespaces_resource_reloads_a_workload_only_with_its_consent() {
    let owner = TestNamespace::create("xns-owner").await;
    let consumer = TestNamespace::create("xns-consumer").await;
    create_configmap(&owner, "cfg", &[("k", "1")], &[]).await;
    create_secret(&owner, "creds", &[("password", "1")], &[]).await;
    create_configmap(&consumer, "own", &[("k", "own")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    Kind::Deployment.create(&owner, "cfg-user", auto.clone(), json!({}), env_from_configmap("cfg")).await;
    Kind::Deployment.create(&owner, "creds-user", auto, json!({}), volume_secret("creds")).await;
    let web = json!({
        "reloader.stakater.com/auto": "true",
        "configmap.reloader.stakater.com/reload": format!("{}/cfg", owner.name),
        "secret.reloader.stakater.com/reload": format!("{}/creds", owner.name),
    });
    Kind::Deployment.create(&consumer, "web", web, json!({}), env_from_configmap("own")).await;
    let scope = format!("--namespaces={},{}", owner.name, consumer.name);
    let _reloader = Reloader::start_unscoped(&[&scope, ALLOW], &[]).await;

    // No consent: refused exactly as with the flag off.
    wait_record(&consumer, "web", "configmap/own").await;
    let before = annotations(&consumer, "web").await;
    assert!(!before[APPLIED].contains(&owner.name), "{before:?}");
    set_configmap_data(&owner, "cfg", &[("k", "2")]).await;
    set_secret_value(&owner, "creds", "password", "2").await;
    Kind::Deployment.wait_revisions(&owner, "cfg-user", 2).await;
    Kind::Deployment.wait_revisions(&owner, "creds-user", 2).await;
    stays_as(&consumer, "web", &before).await;
    let (ok, out, err) = explain_with(&consumer, &[ALLOW], "deploy/web", &[]);
    let refused = format!(
        "ConfigMap {}/cfg: does not reload (cross-namespace reference refused: the resource's {CONSENT} does not \
         name the workload's namespace)",
        owner.name
    );
    assert!(ok && out.contains(&refused), "{out}{err}");

    // Consent (a metadata change): recorded, nothing rolls for the change made while refused.
    let consent = [(CONSENT, consumer.name.as_str())];
    touch_configmap_metadata(&owner, "cfg", &[], &consent).await;
    let patch = json!({"metadata": {"annotations": {CONSENT: consumer.name}}});
    api::<Secret>(&owner).patch("creds", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch");
    wait_record(&consumer, "web", &format!("configmap/{}/cfg", owner.name)).await;
    wait_record(&consumer, "web", &format!("secret/{}/creds", owner.name)).await;
    Kind::Deployment.stays_at_revisions(&consumer, "web", 1).await;

    // The next changes roll it.
    let prefix = format!("STAKATER_{}", owner.name.to_uppercase().replace('-', "_"));
    set_configmap_data(&owner, "cfg", &[("k", "3")]).await;
    Kind::Deployment.wait_revisions(&consumer, "web", 2).await;
    let value = Kind::Deployment.env(&consumer, "web", "app", &format!("{prefix}_CFG_CONFIGMAP")).await;
    assert_eq!(value, Some(configmap_hash(&[("k", "3")])));
    set_secret_value(&owner, "creds", "password", "3").await;
    Kind::Deployment.wait_revisions(&consumer, "web", 3).await;
    let value = Kind::Deployment.env(&consumer, "web", "app", &format!("{prefix}_CREDS_SECRET")).await;
    let plain = secret_hash(&[("password", "3")]);
    let uid = api::<Secret>(&owner).get("creds").await.expect("secret").metadata.uid.expect("uid");
    let sealed = reloader::rules::hash::ContentHash::parse_hex(&plain).expect("hex").sealed(uid.as_bytes()).to_string();
    assert_eq!(value.as_deref(), Some(sealed.as_str()), "the plain SHA-1 is {plain}");
}
