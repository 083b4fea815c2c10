//! The observer fed a replayed watch stream.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::*;
use crate::rules::{
    annotations::AnnotationKeys, decision::DecisionSettings, hash::ContentHash, strategy::ReloadStrategy,
};
use crate::{
    config::WatchScope,
    constants::annotation::RELOAD_WINDOW,
    controller::watch::NamespaceValues,
    controller::{Settings, WatchPlan, WorkQueue},
    index::ConfigKey,
    index::{ConfigFacts, Index},
    workload::{WorkloadKind, summarise},
};

/// A context whose client fails every request: the observer must never need one.
fn context() -> Arc<Context> {
    context_with(tokio::sync::watch::channel(true).1, None)
}

/// [`context`] with its leadership and write limiter.
fn context_with(
    leader: tokio::sync::watch::Receiver<bool>,
    limiter: Option<crate::ratelimit::RateLimiter>,
) -> Arc<Context> {
    context_scoped(leader, limiter, WatchScope::All)
}

/// [`context_with`] watching `scope`.
fn context_scoped(
    leader: tokio::sync::watch::Receiver<bool>,
    limiter: Option<crate::ratelimit::RateLimiter>,
    scope: WatchScope,
) -> Arc<Context> {
    let (service, _handle) =
        tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let settings = Settings {
        optional: vec![],
        discovery_interval: Duration::from_secs(30),
        watch: WatchPlan {
            scope,
            sources: vec![],
            resource_label_selector: None,
            namespace_selector: None,
            namespace_windows: true,
            namespace_rules: true,
        },
        namespaces_to_ignore: vec![],
        reload_on_create: false,
        reload_on_delete: false,
        sync_after_restart: false,
        coalesce_window: Duration::ZERO,
        coalesce_quiet: Duration::ZERO,
        rollout_budget: (0, Duration::from_secs(600)),
        halt_on_failed_rollout: false,
        alerts: None,
        webhook: None,
        keys: Arc::new(AnnotationKeys::default()),
        strategy: ReloadStrategy::EnvVars,
        rollout_strategy: crate::rules::strategy::RolloutStrategy::Rollout,
        decisions: DecisionSettings::default(),
        workers: 1,
        max_backoff: Duration::from_secs(1),
        lease_name: "stakater-reloader-lock".into(),
        write_qps: 0.0,
        write_burst: 1,
        hash_key_secret: None,
        hash_key: None,
        own_namespace: String::new(),
    };
    let stream_context = crate::controller::streams::StreamContext {
        keys: settings.keys.clone(),
        key_registry: Arc::default(),
        lists: crate::controller::initial_lists::InitialLists::Paged,
    };
    Arc::new(Context {
        client: kube::Client::new(service, "default"),
        budget: crate::controller::budget::RolloutBudget::new(0, Duration::from_secs(1)),
        waiting: crate::controller::waiting::Waiting::default(),
        settings,
        stream_context,
        index: std::sync::Mutex::new(Index::default()),
        queue: WorkQueue::new(Duration::from_millis(10), Duration::from_millis(10)),
        metrics: Arc::new(crate::metrics::Metrics::new(false)),
        health: Arc::new(crate::http::Health::with_bound(Duration::ZERO)),
        leader,
        event_sink: None,
        alerter: None,
        webhook_sender: None,
        limiter,
        owed_jobs: Default::default(),
        pod_restarts: Default::default(),
        pod_reads: Default::default(),
    })
}

fn config(name: &str, value: &str, listed: bool) -> Observed {
    let data = [("k".to_owned(), value.to_owned())].into_iter().collect();
    let hash: ContentHash = crate::rules::hash::configmap(Some(&data), None);
    let key = ConfigKey { kind: ConfigKind::ConfigMap, namespace: "ns".into(), name: name.into() };
    Observed::Config {
        stream: 0,
        key,
        facts: ConfigFacts::live(hash, false, false),
        listed,
        views: Vec::new(),
        digest: Default::default(),
    }
}

fn workload(name: &str, listed: bool) -> Observed {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment");
    let (key, summary) = summarise(&d, &AnnotationKeys::default()).expect("summary");
    Observed::Workload { stream: 1, key, summary: Box::new(summary), listed }
}

/// Takes every queued key (marking them done).
async fn drain(ctx: &Context) -> Vec<String> {
    let mut out = Vec::new();
    while !ctx.queue.is_empty() {
        let (k, _) = ctx.queue.next().await.expect("queued key");
        ctx.queue.done(&k);
        out.push(k.name);
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_replayed_watch_stream_queues_exactly_what_level_triggering_needs() {
    let ctx = context();
    let infos = vec![
        StreamInfo { source: Source::Config(ConfigKind::ConfigMap), namespace: None },
        StreamInfo { source: Source::Workload(WorkloadKind::Deployment), namespace: None },
    ];
    let mut o = Observer::new(ctx.clone(), infos);

    // Initial lists, interleaved: nothing is queued until both are complete.
    for ev in [Observed::ListStarted(0), Observed::ListStarted(1), config("cfg", "v1", true), workload("web", true)] {
        o.apply(ev);
    }
    o.apply(config("stale", "v1", true));
    o.apply(Observed::ListDone(0));
    assert!(ctx.queue.is_empty() && ctx.health.readiness(Instant::now()).is_err(), "not synced yet");
    o.apply(Observed::ListDone(1));
    assert_eq!(ctx.health.readiness(Instant::now()), Ok("ok".to_owned()));
    assert_eq!(drain(&ctx).await, ["web"], "every workload is reconciled once after the first sync");

    // A duplicate and a metadata-only event queue nothing; a content change queues its workload.
    o.apply(config("cfg", "v1", false));
    assert!(drain(&ctx).await.is_empty());
    o.apply(config("cfg", "v2", false));
    assert_eq!(drain(&ctx).await, ["web"]);

    // A relist that no longer contains "stale" forgets it; afterwards everything is reconciled again.
    o.apply(Observed::ListStarted(0));
    o.apply(config("cfg", "v2", true));
    o.apply(Observed::ListDone(0));
    let stale = ConfigKey { kind: ConfigKind::ConfigMap, namespace: "ns".into(), name: "stale".into() };
    assert!(ctx.index().config(&stale).is_none());
    assert_eq!(drain(&ctx).await, ["web"]);

    // A watch that keeps failing turns readiness off (bound 0 here) until that stream delivers again.
    for _ in 0..3 {
        o.apply(Observed::Error { stream: 0, code: None, message: "connection refused".into() });
    }
    let why = ctx.health.readiness(Instant::now()).expect_err("failing");
    assert!(why.contains("configmaps: connection refused"), "{why}");
    o.apply(Observed::Recovered(0));
    assert_eq!(ctx.health.readiness(Instant::now()), Ok("ok".to_owned()));
    o.apply(Observed::ListStarted(0));
    o.apply(config("cfg", "v2", true));
    o.apply(Observed::ListDone(0));
    drain(&ctx).await;

    // Workload relist without "web": it is forgotten, and a later change queues nothing.
    o.apply(Observed::ListStarted(1));
    o.apply(workload("api", true));
    o.apply(Observed::ListDone(1));
    drain(&ctx).await;
    o.apply(config("cfg", "v3", false));
    assert_eq!(drain(&ctx).await, ["api"]);
}

/// An observer over a ConfigMap stream (0), a Deployment stream (1) and `extra` streams, with ConfigMap `cfg`
/// (v1) and Deployment `web` (using it) listed on the first two.
fn listed_observer(ctx: &Arc<Context>, extra: &[Source]) -> Observer {
    let mut infos = vec![
        StreamInfo { source: Source::Config(ConfigKind::ConfigMap), namespace: None },
        StreamInfo { source: Source::Workload(WorkloadKind::Deployment), namespace: None },
    ];
    infos.extend(extra.iter().map(|&source| StreamInfo { source, namespace: None }));
    let mut o = Observer::new(ctx.clone(), infos);
    for ev in [Observed::ListStarted(0), Observed::ListStarted(1), config("cfg", "v1", true), workload("web", true)] {
        o.apply(ev);
    }
    o.apply(Observed::ListDone(0));
    o.apply(Observed::ListDone(1));
    o
}

#[tokio::test]
async fn a_stream_that_cannot_list_does_not_hold_back_the_others() {
    let ctx = context();
    let mut o = listed_observer(&ctx, &[Source::Workload(WorkloadKind::DeploymentConfig)]);
    assert!(ctx.queue.is_empty(), "the DeploymentConfig stream has neither listed nor failed yet");
    // It answers 403 (as without RBAC for apps.openshift.io): the others are acted on at once.
    o.apply(Observed::Error { stream: 2, code: Some(403), message: "forbidden".into() });
    assert_eq!(drain(&ctx).await, ["web"]);
    o.apply(config("cfg", "v2", false));
    assert_eq!(drain(&ctx).await, ["web"], "changes are acted on while a stream fails");
    // An optional kind failing is reported but leaves the controller ready.
    for _ in 0..3 {
        o.apply(Observed::Error { stream: 2, code: Some(403), message: "forbidden".into() });
    }
    let body = ctx.health.readiness(Instant::now()).expect("ready");
    assert!(body.contains("deploymentconfigs.apps.openshift.io: forbidden"), "{body}");
}

/// Issue 27, finding 4: under upstream v1's RBAC (no `watch` on workloads) reloads work through the list
/// fallback, so the pod stays Ready: the forbidden watch is named as degraded; a core source nothing else
/// serves (ConfigMaps) still turns readiness off.
#[tokio::test]
async fn a_forbidden_workload_watch_served_by_listing_is_degraded_not_down() {
    let ctx = context();
    let mut o = listed_observer(&ctx, &[]);
    for _ in 0..3 {
        o.apply(Observed::Error { stream: 1, code: Some(403), message: "forbidden".into() });
    }
    let body = ctx.health.readiness(Instant::now()).expect("ready: Deployments are listed on each change");
    assert!(body.contains("degraded") && body.contains("deployments.apps: forbidden"), "{body}");
    for _ in 0..3 {
        o.apply(Observed::Error { stream: 0, code: Some(403), message: "forbidden".into() });
    }
    let why = ctx.health.readiness(Instant::now()).expect_err("ConfigMaps have no other source");
    assert!(why.contains("configmaps: forbidden"), "{why}");
}

/// A workload kind that may not even be listed has no fallback: its failure still turns readiness off.
#[tokio::test]
async fn a_workload_kind_that_may_not_be_listed_is_down() {
    let ctx = context();
    let mut o = listed_observer(&ctx, &[]);
    let message =
        r#"deployments.apps is forbidden: User "system:serviceaccount:a:r" cannot list resource "deployments""#;
    for _ in 0..3 {
        o.apply(Observed::Error { stream: 1, code: Some(403), message: message.into() });
    }
    let why = ctx.health.readiness(Instant::now()).expect_err("no way to see Deployments");
    assert!(why.contains("deployments.apps: deployments.apps is forbidden"), "{why}");
}

#[tokio::test]
async fn a_resource_stream_that_has_not_listed_keeps_the_records_of_its_kind() {
    let ctx = context();
    let infos = vec![
        StreamInfo { source: Source::Config(ConfigKind::ConfigMap), namespace: None },
        StreamInfo { source: Source::Workload(WorkloadKind::Deployment), namespace: None },
    ];
    let mut o = Observer::new(ctx.clone(), infos);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "web",
                     "annotations": {"reloader.stakater.com/auto": "true",
                                     "reloader.stakater.com/applied-hashes": format!("{{\"configmap/cfg\":\"{}\"}}", "a".repeat(40))}},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
    .expect("deployment");
    let (key, summary) = summarise(&d, &AnnotationKeys::default()).expect("summary");
    o.apply(Observed::ListStarted(1));
    o.apply(Observed::Workload { stream: 1, key: key.clone(), summary: Box::new(summary), listed: true });
    o.apply(Observed::ListDone(1));
    o.apply(Observed::Error { stream: 0, code: Some(403), message: "forbidden".into() });
    let plan = ctx.index().plan(&key, DecisionSettings::default(), ReloadStrategy::EnvVars);
    assert!(plan.is_empty(), "nothing to write: the ConfigMap record stays: {plan:?}");
}

#[tokio::test]
async fn a_recreated_resource_or_a_flipped_ignore_is_reconciled_at_once_not_at_the_next_restart() {
    let ctx = context();
    let mut o = listed_observer(&ctx, &[]);
    drain(&ctx).await;
    let key = ConfigKey { kind: ConfigKind::ConfigMap, namespace: "ns".into(), name: "cfg".into() };
    o.apply(Observed::ConfigDeleted(key.clone()));
    assert!(drain(&ctx).await.is_empty(), "a deletion alone reloads nothing (no --reload-on-delete)");
    o.apply(config("cfg", "v2", false));
    assert_eq!(drain(&ctx).await, ["web"], "re-created: its workloads are looked at now");
    let Observed::Config { stream, key, mut facts, listed, views, digest } = config("cfg", "v2", false) else {
        unreachable!()
    };
    facts.ignored = true;
    o.apply(Observed::Config { stream, key, facts, listed, views, digest });
    assert_eq!(drain(&ctx).await, ["web"], "ignore flipped: looked at now");
}

#[tokio::test]
async fn a_first_list_records_nothing_unless_the_stream_failed_before() {
    let ctx = context();
    let infos = vec![
        StreamInfo { source: Source::Config(ConfigKind::ConfigMap), namespace: None },
        StreamInfo { source: Source::Workload(WorkloadKind::Deployment), namespace: None },
    ];
    let mut o = Observer::new(ctx.clone(), infos);
    o.apply(Observed::ListStarted(0));
    o.apply(config("cfg", "v1", true));
    assert!(o.relisting.0.is_empty(), "the startup list keeps no set of what it saw");
    o.apply(Observed::ListDone(0));
    let cfg = ConfigKey { kind: ConfigKind::ConfigMap, namespace: "ns".into(), name: "cfg".into() };
    assert!(ctx.index().config(&cfg).is_some());

    // The Deployment watch fails first (e.g. forbidden: fallback LISTs may index workloads meanwhile); its first
    // list then forgets what it does not contain.
    o.apply(Observed::Error { stream: 1, code: Some(403), message: "forbidden".into() });
    o.apply(workload("ghost", false));
    o.apply(Observed::ListStarted(1));
    o.apply(workload("web", true));
    o.apply(Observed::ListDone(1));
    let names: Vec<String> = ctx.index().workload_keys().into_iter().map(|k| k.name).collect();
    assert_eq!(names, ["web"]);
}

#[tokio::test]
async fn an_invalid_namespace_window_is_reported_once_per_value() {
    let ctx = context();
    let infos = vec![StreamInfo { source: Source::NamespaceAnnotations, namespace: None }];
    let mut o = Observer::new(ctx.clone(), infos);
    let bad = |v: &str| Observed::NamespaceAnnotations {
        stream: 0,
        name: "team".into(),
        values: NamespaceValues { window: Some(v.into()), ..Default::default() },
        listed: false,
    };
    let bad_window = |o: &Observer| o.bad_namespace_values.get(&("team".into(), RELOAD_WINDOW.into())).cloned();
    o.apply(bad("Mon-Fri 25:00-26:00 UTC"));
    assert_eq!(bad_window(&o).as_deref(), Some("Mon-Fri 25:00-26:00 UTC"));
    // The same value again (a relist, any update of the namespace) is not reported again: the record is unchanged.
    o.apply(bad("Mon-Fri 25:00-26:00 UTC"));
    assert_eq!(o.bad_namespace_values.len(), 1);
    o.apply(bad("nonsense"));
    assert_eq!(bad_window(&o).as_deref(), Some("nonsense"), "a new bad value is reported");
    o.apply(Observed::NamespaceAnnotations {
        stream: 0,
        name: "team".into(),
        values: NamespaceValues { window: Some("Mon-Fri 02:00-04:00 UTC".into()), ..Default::default() },
        listed: false,
    });
    assert!(o.bad_namespace_values.is_empty(), "fixed: a later bad value is reported again");
}

#[tokio::test]
async fn a_namespace_gone_from_a_relist_forgets_its_reported_bad_window() {
    let ctx = context();
    let infos = vec![StreamInfo { source: Source::NamespaceAnnotations, namespace: None }];
    let mut o = Observer::new(ctx, infos);
    let window = |name: &str, value: &str, listed| Observed::NamespaceAnnotations {
        stream: 0,
        name: name.into(),
        values: NamespaceValues { window: Some(value.into()), ..Default::default() },
        listed,
    };
    o.apply(Observed::ListStarted(0));
    o.apply(window("team", "nonsense", true));
    o.apply(window("other", "nonsense", true));
    o.apply(Observed::ListDone(0));
    assert_eq!(o.bad_namespace_values.len(), 2);
    // The watch relists; `team` was deleted meanwhile.
    o.apply(Observed::ListStarted(0));
    o.apply(window("other", "nonsense", true));
    o.apply(Observed::ListDone(0));
    let left: Vec<&str> = o.bad_namespace_values.keys().map(|(ns, _)| ns.as_str()).collect();
    assert_eq!(left, ["other"]);
}

/// Issue 27, finding 8: a write slot granted after leadership ended is not a licence to write.
#[tokio::test(start_paused = true)]
async fn a_replica_that_stepped_down_while_waiting_for_the_write_limit_does_not_write() {
    let (leads, leader) = tokio::sync::watch::channel(true);
    let ctx = context_with(leader, crate::ratelimit::RateLimiter::new(1.0, 1));
    assert!(ctx.write_slot().await, "the first write goes at once, while leading");
    let waiting = {
        let ctx = ctx.clone();
        tokio::spawn(async move { ctx.write_slot().await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "waits for the next token");
    leads.send_replace(false);
    assert!(!waiting.await.expect("write_slot"), "stepped down meanwhile: no write");
}

/// Issue 27, finding 6: a workload missing from a relist leaves the same way as a deleted one. Its rollout
/// budget slot was kept before, held until `--rollout-timeout` and then counted as a failed rollout (with
/// `--halt-on-failed-rollout`, a halted change for nothing).
#[tokio::test]
async fn a_workload_gone_from_a_relist_frees_its_rollout_slot() {
    let ctx = context();
    let mut o = listed_observer(&ctx, &[]);
    let web = WorkloadKey { kind: WorkloadKind::Deployment, namespace: "ns".into(), name: "web".into() };
    ctx.budget.admit(&web, Instant::now());
    assert_eq!(ctx.budget.sizes(), (1, 0), "web's rollout is in flight");
    o.apply(Observed::ListStarted(1));
    o.apply(Observed::ListDone(1));
    assert!(ctx.index().workload_uid(&web).is_none(), "forgotten by the index");
    assert_eq!(ctx.budget.sizes(), (0, 0), "and by the rollout budget");
}

/// Issue 38, finding 7: owed Job recreations come from a Secret every controller of its namespace shares; only
/// those in this controller's `--namespaces` are queued (before, every entry was, and its reconcile created a Job
/// in a namespace the controller does not watch).
#[tokio::test]
async fn owed_job_recreations_are_queued_only_in_scope() {
    let scope = WatchScope::Namespaces(vec!["mine".into()]);
    let ctx = context_scoped(tokio::sync::watch::channel(true).1, None, scope);
    let mut o = Observer::new(ctx.clone(), Vec::new());
    let job = |namespace: &str, name: &str| WorkloadKey {
        kind: WorkloadKind::Job,
        namespace: namespace.into(),
        name: name.into(),
    };
    o.apply(Observed::OwedJobs(vec![job("mine", "migrate"), job("theirs", "other")]));
    assert_eq!(drain(&ctx).await, vec!["migrate".to_owned()]);
    let skipped = ctx.metrics.skipped.with_label_values(&["ignored_or_not_selected"]).get();
    assert_eq!(skipped, 0, "an entry out of scope is not a skipped change");
}
