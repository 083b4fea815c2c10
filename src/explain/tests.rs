//! Unit tests of `explain`: target parsing and exact output.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::rules::annotations::AnnotationKeys;
use crate::workload::summarise;
use k8s_openapi::api::apps::v1::Deployment;

#[test]
fn targets_take_kubectl_kind_names() {
    let workload = |kind| Target::Workload(kind, "web".to_owned());
    let config = |kind| Target::Config(kind, "web".to_owned());
    let ok = [
        ("deployment/web", workload(WorkloadKind::Deployment)),
        ("deploy/web", workload(WorkloadKind::Deployment)),
        ("Deployments/web", workload(WorkloadKind::Deployment)),
        ("sts/web", workload(WorkloadKind::StatefulSet)),
        ("ds/web", workload(WorkloadKind::DaemonSet)),
        ("cj/web", workload(WorkloadKind::CronJob)),
        ("job/web", workload(WorkloadKind::Job)),
        ("rollouts/web", workload(WorkloadKind::Rollout)),
        ("dc/web", workload(WorkloadKind::DeploymentConfig)),
        ("configmap/web", config(ConfigKind::ConfigMap)),
        ("cm/web", config(ConfigKind::ConfigMap)),
        ("Secrets/web", config(ConfigKind::Secret)),
        ("secretproviderclass/web", config(ConfigKind::SecretProviderClass)),
        ("secretproviderclasses/web", config(ConfigKind::SecretProviderClass)),
        ("spc/web", config(ConfigKind::SecretProviderClass)),
    ];
    for (text, target) in ok {
        assert_eq!(parse_target(text).expect(text), target, "{text}");
    }
    for bad in ["web", "pod/web", "deployment/", "/web", "class/web"] {
        let e = parse_target(bad).expect_err(bad).to_string();
        assert!(e.contains("is not <kind>/<name>"), "{bad}: {e}");
    }
}

fn hash_of(value: &str) -> ContentHash {
    crate::rules::hash::configmap(Some(&BTreeMap::from([("k".to_owned(), value.to_owned())])), None)
}

fn config(kind: ConfigKind, name: &str, hash: ContentHash, ignored: bool) -> (ConfigKey, ConfigFacts) {
    let key = ConfigKey { kind, namespace: "shop".into(), name: name.into() };
    (key, ConfigFacts::live(hash, ignored, false))
}

fn web(env: serde_json::Value) -> (WorkloadKey, WorkloadSummary) {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u",
            "annotations": {"reloader.stakater.com/auto": "true", "configmap.reloader.stakater.com/reload": "flags"}},
        "spec": {"selector": {}, "template": {"spec": {
            "containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}], "env": env,
                "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
            "volumes": [{"name": "v", "secret": {"secretName": "creds"}}]}}}
    }))
    .expect("deployment");
    summarise(&deployment, &AnnotationKeys::default()).expect("summary")
}

/// What the controller sees, without a hash key.
fn visible<'a>(
    configs: &'a [(ConfigKey, ConfigFacts)],
    watched: &'a [ConfigKind],
    namespace_inactive: Option<String>,
    start: Baseline,
) -> Visible<'a> {
    let gates = GateFacts { peers: &[], halt_default: false, budget: 0, now: jiff::Timestamp::UNIX_EPOCH };
    Visible { namespace_inactive, configs, watched, start, hash_key: None, views: &[], gates }
}

fn configs() -> Vec<(ConfigKey, ConfigFacts)> {
    vec![
        config(ConfigKind::Secret, "creds", hash_of("s"), true),
        config(ConfigKind::ConfigMap, "flags", hash_of("f"), false),
        config(ConfigKind::ConfigMap, "unrelated", hash_of("u"), false),
        config(ConfigKind::ConfigMap, "cfg", hash_of("2"), false),
    ]
}

#[test]
fn explains_each_resource_with_the_controllers_reasons() {
    let (key, summary) = web(json!([]));
    let watched = [ConfigKind::ConfigMap, ConfigKind::Secret];
    let configs = configs();
    let visible = visible(&configs, &watched, None, Baseline::Current);
    let text = explain(&key, &summary, &visible, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    assert_eq!(
        text,
        "Deployment shop/web\n\
         \x20 ConfigMap cfg: reloads on change (auto: referenced via envFrom; container app)\n\
         \x20 ConfigMap flags: reloads on change (matched named list \"flags\"; container app)\n\
         \x20 Secret creds: does not reload (ignored: resource has the ignore annotation)\n\
         \x20 now: up to date; a controller starting now would not roll it out\n"
    );
}

#[test]
fn a_recorded_hash_that_differs_from_the_content_would_roll_out_now() {
    let (key, summary) = web(json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": hash_of("1").to_string()}]));
    let watched = [ConfigKind::ConfigMap];
    let configs = configs();
    let visible = visible(&configs, &watched, None, Baseline::Current);
    let text = explain(&key, &summary, &visible, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    assert!(text.contains("  Secrets are not watched (--resources-to-ignore): they never reload it\n"), "{text}");
    assert!(
        text.ends_with(&format!(
            "  now: would roll out for ConfigMap cfg: the workload records {}, the content is {}\n",
            hash_of("1"),
            hash_of("2")
        )),
        "{text}"
    );
}

#[test]
fn an_inactive_namespace_is_said_first_and_nothing_is_planned() {
    let (key, summary) = web(json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": hash_of("1").to_string()}]));
    let configs = configs();
    let watched = [ConfigKind::ConfigMap];
    let why = Some("ignored (--namespaces-to-ignore)".to_owned());
    let visible = visible(&configs, &watched, why, Baseline::Current);
    let text = explain(&key, &summary, &visible, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "  namespace shop: ignored (--namespaces-to-ignore); no change in it reloads anything");
    assert!(!text.contains("now:"), "{text}");
}

#[test]
fn with_sync_after_restart_an_unrecorded_workload_would_roll() {
    let (key, summary) = web(json!([]));
    let configs = configs();
    let watched = [ConfigKind::ConfigMap];
    let visible = visible(&configs, &watched, None, Baseline::Stale);
    let text = explain(&key, &summary, &visible, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text();
    let cfg = format!(
        "  now: would roll out for ConfigMap cfg: the workload records no hash, the content is {}\n",
        hash_of("2")
    );
    assert!(text.contains(&cfg), "{text}");
}

#[test]
fn a_suspended_cronjob_says_it_spawns_nothing() {
    let cronjob = |suspend: bool| {
        let cronjob: k8s_openapi::api::batch::v1::CronJob = serde_json::from_value(json!({
            "metadata": {"name": "nightly", "namespace": "shop", "uid": "u",
                "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"schedule": "0 0 1 1 *", "suspend": suspend, "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "main", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}}}
        }))
        .expect("cronjob");
        summarise(&cronjob, &AnnotationKeys::default()).expect("summary")
    };
    let configs = configs();
    let watched = [ConfigKind::ConfigMap];
    let visible = visible(&configs, &watched, None, Baseline::Stale);
    let waits = |suspend| {
        let (key, summary) = cronjob(suspend);
        explain(&key, &summary, &visible, DecisionSettings::default(), ReloadStrategy::EnvVars).waits
    };
    assert_eq!(
        waits(true).as_deref(),
        Some(
            "the CronJob is suspended: the change is recorded and no Job is spawned (its next run after it is \
             resumed uses its template as it is)"
        )
    );
    assert_eq!(waits(false), None);
}

/// With `--max-concurrent-rollouts`, a write that starts a rollout may wait for a slot; an `OnDelete` template
/// write starts none (its pods are replaced only when deleted), so explain does not say it may wait.
#[test]
fn the_budget_line_follows_what_the_controller_counts() {
    let (key, summary) = web(json!([{"name": "STAKATER_CFG_CONFIGMAP", "value": hash_of("1").to_string()}]));
    let configs = configs();
    let watched = [ConfigKind::ConfigMap];
    let mut visible = visible(&configs, &watched, None, Baseline::Current);
    visible.gates.budget = 2;
    let explained = |summary: &WorkloadSummary| {
        explain(&key, summary, &visible, DecisionSettings::default(), ReloadStrategy::EnvVars).to_text()
    };
    let budget = "  waits: at most 2 rollouts run at once (--max-concurrent-rollouts): it may wait for a slot\n";
    assert!(explained(&summary).ends_with(budget), "{}", explained(&summary));
    let on_delete = WorkloadSummary { rollout: crate::workload::RolloutState::Untracked, ..summary.clone() };
    assert!(!explained(&on_delete).contains("--max-concurrent-rollouts"), "{}", explained(&on_delete));
    let evicted =
        WorkloadSummary { rollout_strategy: Some(crate::rules::strategy::RolloutStrategy::EvictPods), ..on_delete };
    assert!(explained(&evicted).ends_with(budget), "{}", explained(&evicted));
}
