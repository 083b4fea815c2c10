//! The imperative shell: watches → index → work queue → one patch per reload.
//!
//! One task applies watch observations to the [`Index`] and queues the workloads a change concerns; workers
//! take workloads off the [`WorkQueue`], ask the index what they must be reloaded for, and send one patch.
//! Nothing is queued until every watch has finished its first list; then every workload is reconciled once,
//! which applies changes made while the controller was down and restarts nothing else.

mod observe_csi;
mod observer;
mod queue;
mod settings;
mod watch;

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use futures::{FutureExt, StreamExt};
use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use observer::Observer;
pub use queue::WorkQueue;
pub use settings::{OptionalKind, Settings};
pub use watch::{Observed, Source, StreamInfo, WatchPlan, configmap_facts, secret_facts};

use crate::{
    alerts::{AlertConfig, Alerter},
    constants::APPLIED_HASHES_BUDGET,
    events::EventSink,
    http::Health,
    index::{Index, PlannedReload},
    metrics::Metrics,
    pause::{self, PauseAction},
    strategy::{TemplateChange, encode_applied_hashes},
    workload::{self, WorkloadKey, WorkloadKind, WorkloadWrite},
};

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The patch was rejected or could not be sent.
    #[error("patching {workload} for {resources}: {source}")]
    Patch {
        /// The workload.
        workload: String,
        /// The resources it was reloaded for.
        resources: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The reconcile panicked (a bug met by some object): contained, counted and retried with backoff, so
    /// the worker and every other workload go on.
    #[error("reconciling {workload} panicked: {message}")]
    Panicked {
        /// The workload.
        workload: String,
        /// The panic's message.
        message: String,
    },
}

impl Error {
    /// Conflicts, throttling, server errors and transport failures are retried; other API errors are not.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Patch { source: kube::Error::Api(status), .. } => {
                matches!(status.code, 409 | 429) || status.code >= 500
            }
            Self::Patch { .. } | Self::Panicked { .. } => true,
        }
    }
}

struct Context {
    client: Client,
    settings: Settings,
    index: Mutex<Index>,
    queue: WorkQueue<WorkloadKey>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    events: Option<EventSink>,
    /// Alerts after reloads.
    alerts: Option<Alerter>,
    /// `--webhook-url`: POST instead of reloading.
    webhook: Option<Alerter>,
}

impl Context {
    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long in-flight writes may take to finish after shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The controller stopped because this replica lost the lease (upstream v1 then marks `/live` unhealthy so the
/// kubelet restarts it; we also exit, like v2).
#[derive(Debug, thiserror::Error)]
#[error("no longer leader, shutting down")]
pub struct LostLeadership;

/// Runs the controller until `shutdown` is cancelled; in-flight writes finish (within a bound) before it
/// returns. `health` turns ready once every watch has synced. Workers write only while `leader` is true; every
/// replica keeps watching, so a new leader starts from a warm index and reconciles everything once.
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: CancellationToken,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    mut leader: tokio::sync::watch::Receiver<bool>,
) -> Result<(), LostLeadership> {
    let (mut missing, present) = discover(&client, &settings.optional).await;
    let mut sources = settings.watch.sources.clone();
    sources.extend(present);
    let (infos, mut observations) = watch::observe(&client, &settings.watch, &sources, &settings.keys);
    let queue = WorkQueue::new(Duration::from_millis(100), settings.max_backoff);
    let busy = {
        let queue = queue.clone();
        move || queue.has_change_work()
    };
    let events = Some(EventSink::spawn(client.clone(), metrics.clone(), busy));
    let spawn =
        |cfg: Option<AlertConfig>| cfg.and_then(|c| Alerter::spawn(c, metrics.clone()).map_err(|e| warn!("{e}")).ok());
    let (alerts, webhook) = (spawn(settings.alerts.clone()), spawn(settings.webhook.clone()));
    if webhook.is_some() {
        warn!("webhook-url is set, will only send webhook, no resources will be reloaded");
    }
    let index = Mutex::new(Index::default());
    let ctx = Arc::new(Context { client, settings, index, queue, metrics, health, events, alerts, webhook });
    let workers: Vec<_> =
        (0..ctx.settings.workers.max(1)).map(|_| tokio::spawn(worker(ctx.clone(), leader.clone()))).collect();
    info!(
        scope = ?ctx.settings.watch.scope,
        kinds = ?ctx.settings.watch.sources,
        strategy = ?ctx.settings.strategy,
        auto_reload_all = ctx.settings.decisions.auto_reload_all,
        "Starting Reloader"
    );
    let mut observer = Observer::new(ctx.clone(), infos);
    let mut rediscover = tokio::time::interval(ctx.settings.discovery_interval.max(Duration::from_millis(100)));
    rediscover.tick().await;
    let mut was_leader = *leader.borrow();
    ctx.metrics.leader.set(if was_leader { 1 } else { 0 });
    let mut result = Ok(());
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            changed = leader.changed() => {
                let is_leader = changed.is_ok() && *leader.borrow();
                ctx.metrics.leader.set(if is_leader { 1 } else { 0 });
                if is_leader && !was_leader {
                    info!("became leader, starting controllers");
                    observer.reconcile_all();
                } else if !is_leader && was_leader {
                    warn!("no longer leader, shutting down");
                    ctx.health.set_not_live();
                    result = Err(LostLeadership);
                    break;
                } else if changed.is_err() {
                    break;
                }
                was_leader = is_leader;
            }
            _ = rediscover.tick(), if !missing.is_empty() => {
                let (still_missing, found) = discover(&ctx.client, &missing).await;
                missing = still_missing;
                if !found.is_empty() {
                    let mut infos = observer.infos().to_vec();
                    let before = infos.len();
                    watch::add_sources(&ctx.client, &ctx.settings.watch, &found, &ctx.settings.keys, &mut infos, &mut observations);
                    for info in infos.into_iter().skip(before) {
                        observer.add_stream(info);
                    }
                }
            }
            next = observations.next() => match next {
                Some(o) => {
                    // A bug one object triggers must not stop every watch: log it, count it, go on.
                    if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| observer.apply(o))) {
                        ctx.metrics.panics.inc();
                        error!("applying a watch observation panicked: {}", panic_message(panic.as_ref()));
                    }
                }
                None => break,
            },
        }
    }
    ctx.queue.shut_down();
    if result.is_err() {
        // Another replica may lead by now: a write still in flight must not land after it took over.
        for w in &workers {
            w.abort();
        }
    } else {
        info!("shutting down: finishing in-flight reloads");
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, futures::future::join_all(workers)).await;
    if drained.is_err() {
        warn!("in-flight reloads did not finish within {SHUTDOWN_GRACE:?}; exiting anyway");
    }
    result
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// Splits optional kinds into those whose API is not served (logged once) and those to watch now.
async fn discover(client: &Client, kinds: &[OptionalKind]) -> (Vec<OptionalKind>, Vec<Source>) {
    let (mut missing, mut present) = (Vec::new(), Vec::new());
    for kind in kinds {
        let served = match client.list_api_group_resources(kind.group_version).await {
            Ok(list) => list.resources.iter().any(|r| r.name == kind.plural),
            Err(e) => {
                debug!(api = kind.group_version, "discovery: {e}");
                false
            }
        };
        if served {
            info!(api = kind.group_version, resource = kind.plural, "API found; watching {}", kind.plural);
            present.extend_from_slice(kind.sources);
        } else {
            missing.push(*kind);
        }
    }
    for kind in &missing {
        info!(
            api = kind.group_version,
            resource = kind.plural,
            "API not installed; {} are not reloaded until it appears",
            kind.plural
        );
    }
    (missing, present)
}

async fn worker(ctx: Arc<Context>, mut leader: tokio::sync::watch::Receiver<bool>) {
    loop {
        // Non-leaders keep queueing (deduplicated per workload) but never write.
        if leader.wait_for(|l| *l).await.is_err() {
            return;
        }
        let Some((key, triggered)) = ctx.queue.next().await else { return };
        if !*leader.borrow() {
            ctx.queue.done(&key);
            ctx.queue.add(key, triggered);
            continue;
        }
        let m = &ctx.metrics;
        m.queue_depth.set(i64::try_from(ctx.queue.len()).unwrap_or(i64::MAX));
        m.queue_latency.observe(triggered.elapsed().as_secs_f64());
        let started = Instant::now();
        let result = match AssertUnwindSafe(reconcile(&ctx, &key, triggered)).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                m.panics.inc();
                Err(Error::Panicked { workload: key.to_string(), message: panic_message(panic.as_ref()) })
            }
        };
        let outcome = match &result {
            Ok(true) => "success",
            Ok(false) => "skipped",
            Err(_) => "error",
        };
        m.reconcile.with_label_values(&[outcome]).inc();
        m.reconcile_duration.with_label_values(&[outcome]).observe(started.elapsed().as_secs_f64());
        match result {
            Ok(_) => ctx.queue.done(&key),
            Err(e) if e.is_transient() => {
                m.retries.inc();
                let (attempt, delay) = ctx.queue.retry(&key, triggered);
                warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, attempt, ?delay, "reload failed, retrying: {e}");
            }
            Err(e) => {
                error!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, "Rolling upgrade failed, not retrying: {e}");
                ctx.queue.forget(&key);
            }
        }
    }
}

/// Plans and writes one workload; `Ok(false)` when there was nothing to write.
async fn reconcile(ctx: &Context, key: &WorkloadKey, triggered: Instant) -> Result<bool, Error> {
    if ctx.webhook.is_some() {
        // `--webhook-url`: notify instead of reloading; level-triggered reconciles must not write either.
        return Ok(false);
    }
    let (plan, pause_state, uid, restart_strategy) = {
        let mut index = ctx.index();
        (
            index.plan(key, ctx.settings.decisions, ctx.settings.strategy),
            index.pause_state(key),
            index.workload_uid(key),
            index.restart_strategy(key),
        )
    };
    let now = jiff::Timestamp::now();
    let pause = match pause_state {
        Some(state) if key.kind == WorkloadKind::Deployment => pause::evaluate(&state, !plan.reloads.is_empty(), now),
        _ => PauseAction::None,
    };
    if let PauseAction::ResumeIn(delay) = pause {
        // Level-triggered resume: look again when the period ends (also after a restart or leader change).
        ctx.queue.add_after(key.clone(), Instant::now(), delay.saturating_add(Duration::from_millis(50)));
    }
    let pause = match pause {
        PauseAction::None | PauseAction::ResumeIn(_) => None,
        action => Some((ctx.settings.keys.paused_at.as_str(), action)),
    };
    if plan.is_empty() && pause.is_none() {
        ctx.metrics.skipped.with_label_values(&["strategy_not_updated"]).inc();
        return Ok(false);
    }
    let changes: Vec<TemplateChange> = plan.reloads.iter().map(template_change).collect();
    let write = WorkloadWrite {
        strategy: ctx.settings.strategy,
        changes: &changes,
        // The wall-clock time of the first trigger, not of this attempt: a retry after a lost response writes
        // the same `observedAt` / `restartAt` again, which changes nothing, instead of a second rollout.
        now_unix: now.as_second().saturating_sub(i64::try_from(triggered.elapsed().as_secs()).unwrap_or(0)),
        applied_hashes: plan.applied_hashes.as_ref().map(encode_applied_hashes),
        pause: pause.clone(),
        restart: restart_strategy,
    };
    let kind = key.kind.to_string();
    let mut plan = plan;
    let mut result = workload::write(&ctx.client, key, &write).await;
    if let Err(kube::Error::Api(status)) = &result
        && status.code == 422
        && write.applied_hashes.is_some()
        && !plan.reloads.is_empty()
    {
        // The record never blocks the reload: e.g. annotations at their 256 KiB limit (a large
        // `last-applied-configuration`). Reload without it; restart-safety for this workload then rests on the
        // template's own records.
        warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
              "the applied-hashes record was rejected ({}); reloading without it", status.message);
        plan.applied_hashes = None;
        result = workload::write(&ctx.client, key, &WorkloadWrite { applied_hashes: None, ..write.clone() }).await;
    }
    if plan.unrecorded > 0 && plan.applied_hashes.is_some() && result.is_ok() {
        warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, left_out = plan.unrecorded,
              "the applied-hashes record is limited to {} bytes: {} resources are not recorded, so a change to them \
               made while the controller is down is not applied when it starts", APPLIED_HASHES_BUDGET, plan.unrecorded);
    }
    let m = &ctx.metrics;
    if !plan.reloads.is_empty() && !matches!(&result, Err(kube::Error::Api(s)) if s.code == 404) {
        let ok = result.is_ok();
        m.reload_executed(ok, &key.namespace);
        m.action.with_label_values(&[kind.as_str(), if ok { "success" } else { "error" }]).inc();
        if ok {
            m.action_latency.with_label_values(&[&kind]).observe(triggered.elapsed().as_secs_f64());
            m.workloads_matched.with_label_values(&[&kind]).inc();
        } else {
            m.errors.with_label_values(&["handler_error"]).inc();
        }
    }
    match result {
        Ok(()) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {
            debug!(workload = %key, "workload is gone; nothing to reload");
            return Ok(false);
        }
        Err(source) => {
            if let Some(events) = &ctx.events {
                events.reload_failed(key, uid, &source.to_string());
            }
            let resources = plan.reloads.iter().map(|r| r.config.to_string()).collect::<Vec<_>>().join(", ");
            let resources = if resources.is_empty() { "its applied-hashes record".to_owned() } else { resources };
            let error = Error::Patch { workload: key.to_string(), resources, source };
            if !error.is_transient() {
                ctx.index().mark_rejected(key, &plan);
            }
            return Err(error);
        }
    }
    ctx.index().mark_written(key, &plan);
    let latency_ms = triggered.elapsed().as_secs_f64() * 1000.0;
    match &pause {
        Some((_, PauseAction::Pause { at })) => {
            info!(namespace = %key.namespace, workload = %key.name, paused_at = %at,
            "Paused deployment '{}' in namespace '{}' for its pause period", key.name, key.namespace)
        }
        Some((_, PauseAction::Resume)) => info!(namespace = %key.namespace, workload = %key.name,
            "Successfully resumed deployment '{}' in namespace '{}'", key.name, key.namespace),
        _ => {}
    }
    if plan.reloads.is_empty() {
        debug!(workload = %key, "recorded applied hashes");
    }
    for r in &plan.reloads {
        if let Some(events) = &ctx.events {
            events.reloaded(key, uid.clone(), &r.config.name, r.config.kind.upstream_type());
        }
        if let Some(alerts) = &ctx.alerts {
            alerts.reloaded(
                &r.config.name,
                r.config.kind.upstream_type(),
                &key.name,
                &key.kind.to_string(),
                &key.namespace,
            );
        }
        info!(
            namespace = %key.namespace, workload = %key.name, kind = %key.kind,
            config = %r.config.name, config_kind = %r.config.kind, reason = %r.reason, latency_ms,
            deleted = r.deleted,
            "Changes detected in '{}' of type '{}' in namespace '{}'; updated '{}' of type '{}' in namespace '{}'",
            r.config.name, r.config.kind.upstream_type(), r.config.namespace, key.name, key.kind, key.namespace
        );
    }
    Ok(true)
}

fn template_change(r: &PlannedReload) -> TemplateChange {
    TemplateChange {
        kind: r.config.kind,
        name: r.config.name.clone(),
        namespace: r.config.namespace.to_string(),
        hash: r.hash,
        container: r.container.clone(),
        deleted: r.deleted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> Error {
        let status = kube::core::Status { code, message: "m".into(), reason: "r".into(), ..Default::default() };
        Error::Patch { workload: "w".into(), resources: "r".into(), source: kube::Error::Api(status.boxed()) }
    }

    #[test]
    fn conflicts_throttling_and_server_errors_are_retried_other_rejections_are_not() {
        for code in [409, 429, 500, 503] {
            assert!(api_error(code).is_transient(), "{code}");
        }
        for code in [400, 403, 404, 415, 422] {
            assert!(!api_error(code).is_transient(), "{code}");
        }
    }
}
