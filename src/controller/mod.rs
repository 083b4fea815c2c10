//! The imperative shell: watches → index → work queue → one patch per reload.
//!
//! One task applies watch observations to the [`Index`] and queues the workloads a change concerns; workers
//! take workloads off the [`WorkQueue`], ask the index what they must be reloaded for, and send one patch.
//! Nothing is queued until every watch has finished its first list; then every workload is reconciled once,
//! which applies changes made while the controller was down and restarts nothing else.

mod budget;
mod initial_lists;
mod observer;
mod owed_job_resume;
mod pod_restarts;
mod queue;
mod read_views;
mod reconcile;
mod reconcile_error;
mod settings;
mod streams;
mod translate;
mod waiting;
mod watch;
mod worker;

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use futures::StreamExt;
use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use observer::Observer;
pub use queue::WorkQueue;
pub use reconcile_error::Error;
pub use settings::{OptionalKind, Settings};
pub use streams::{config_flags, configmap_facts, secret_facts};
pub use watch::{NamespaceValues, Observed, Source, StreamInfo, WatchPlan};
use worker::{panic_message, worker};

use crate::{
    alerts::{AlertConfig, Alerter},
    events::EventSink,
    http::Health,
    index::Index,
    metrics::Metrics,
    workload::WorkloadKey,
};

struct Context {
    client: Client,
    settings: Settings,
    /// What watch streams read (annotation keys, the key-level registry).
    stream_context: streams::StreamContext,
    /// `--max-concurrent-rollouts`.
    budget: budget::RolloutBudget,
    /// Workloads waiting at a rollout gate (issue 17).
    waiting: waiting::Waiting,
    index: Mutex<Index>,
    queue: WorkQueue<WorkloadKey>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    /// Whether this replica leads: side effects (writes, Events, alerts, webhooks) come from the leader only.
    leader: tokio::sync::watch::Receiver<bool>,
    /// Reached through [`Context::events`] (the leader's only).
    event_sink: Option<EventSink>,
    /// Alerts after reloads, reached through [`Context::alerts`].
    alerter: Option<Alerter>,
    /// `--webhook-url`: POST instead of reloading ([`Context::webhook`]).
    webhook_sender: Option<Alerter>,
    /// Workload writes per second (`--kube-api-qps`, `--kube-api-burst`).
    limiter: Option<crate::ratelimit::RateLimiter>,
    /// Job recreations owed, kept in the cluster (`crate::workload::owed_jobs`).
    owed_jobs: crate::workload::OwedJobs,
    /// What this controller remembers of pod restarts in progress (`evict-pods`, `delete-pods`).
    pod_restarts: pod_restarts::Progress,
    /// Reads of pods for what they use (kinds without a pod template), a few at a time.
    pod_reads: observer::PodReads,
}

impl Context {
    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True while this replica leads (always without `--enable-ha`).
    fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    /// Where Events go, while this replica leads: a follower sees the same objects and would repeat every
    /// Event (upstream v1 runs no handlers on followers).
    fn events(&self) -> Option<&EventSink> {
        self.event_sink.as_ref().filter(|_| self.leads())
    }

    /// Where alerts go, while this replica leads.
    fn alerts(&self) -> Option<&Alerter> {
        self.alerter.as_ref().filter(|_| self.leads())
    }

    /// `--webhook-url` mode: changes are posted instead of reloaded (by every replica's rules, by the leader).
    fn webhook_mode(&self) -> bool {
        self.webhook_sender.is_some()
    }

    /// Where `--webhook-url` POSTs go, while this replica leads.
    fn webhook(&self) -> Option<&Alerter> {
        self.webhook_sender.as_ref().filter(|_| self.leads())
    }

    /// Waits for the write rate limit (`--kube-api-qps`), if any; then says whether this replica still leads.
    /// The wait can be long (a fan-out at 50 writes/s) and leadership can end meanwhile (the elector runs on a
    /// thread of its own): a replica that stepped down must not send the write (issue 27, finding 8).
    async fn write_slot(&self) -> bool {
        if let Some(limiter) = &self.limiter {
            let asked = Instant::now();
            limiter.acquire().await;
            self.metrics.write_limiter_wait.inc_by(asked.elapsed().as_secs_f64());
        }
        self.leads()
    }
}

/// How long in-flight writes may take to finish after shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long the Events still held may take to be published after that (within the Pod's default 30 s grace).
const EVENTS_GRACE: Duration = Duration::from_secs(5);

/// Why the controller stopped without being asked to: the process then exits with an error, so the kubelet
/// restarts it and its status says it failed.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// This replica lost the lease (upstream v1 then marks `/live` unhealthy so the kubelet restarts it; we also
    /// exit, like v2).
    #[error("no longer leader, shutting down")]
    LostLeadership,
    /// Leader election ended before shutdown (it could not start; its error is logged): this replica could never
    /// lead, so staying up as a follower would only hide that nothing reloads.
    #[error("leader election stopped, so this replica can never lead: exiting")]
    ElectionStopped,
}

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
) -> Result<(), Stopped> {
    let (mut missing, present) = discover(&client, &settings.optional).await;
    // Said once, at start: the periodic look for them below stays quiet until one appears (a cluster without
    // OpenShift would otherwise log DeploymentConfigs' absence every `--discovery-interval`).
    for kind in &missing {
        info!(
            api = kind.group_version,
            resource = kind.plural,
            "API not installed; {} are not reloaded until it appears",
            kind.plural
        );
    }
    let mut sources = settings.watch.sources.clone();
    sources.extend(present);
    let key_registry = Arc::new(crate::index::KeyRegistry::default());
    let stream_context = streams::StreamContext {
        keys: settings.keys.clone(),
        key_registry: key_registry.clone(),
        lists: initial_lists::InitialLists::for_server(&client).await,
    };
    let (infos, mut observations) = streams::observe(&client, &settings.watch, &sources, &stream_context);
    let queue = WorkQueue::new(Duration::from_millis(100), settings.max_backoff);
    let busy = {
        let queue = queue.clone();
        move || queue.has_change_work()
    };
    let (event_sink, events_flush) = EventSink::spawn(client.clone(), metrics.clone(), busy, queue.settled_signal());
    let spawn =
        |cfg: Option<AlertConfig>| cfg.and_then(|c| Alerter::spawn(c, metrics.clone()).map_err(|e| warn!("{e}")).ok());
    let (alerter, webhook_sender) = (spawn(settings.alerts.clone()), spawn(settings.webhook.clone()));
    if webhook_sender.is_some() {
        warn!("webhook-url is set, will only send webhook, no resources will be reloaded");
    }
    let mut index = Index::default();
    index.set_hash_key(settings.hash_key.clone());
    index.set_cross_namespace(settings.decisions.cross_namespace);
    index.set_key_level(key_registry.clone(), settings.decisions.keys_used);
    let index = Mutex::new(index);
    let limiter = crate::ratelimit::RateLimiter::new(settings.write_qps, settings.write_burst);
    let budget = budget::RolloutBudget::new(settings.rollout_budget.0, settings.rollout_budget.1);
    // Only where Jobs are reloaded is anything owed (and the chart grants the Secret).
    let reloads_jobs = settings.watch.sources.contains(&Source::Workload(crate::workload::OwedJobs::KIND));
    // An owed recreation whose Job is gone is created within `--rollout-timeout` of its reload, never later
    // (owed_jobs.rs says why).
    let owed_jobs = crate::workload::OwedJobs::new(
        if reloads_jobs { &settings.own_namespace } else { "" },
        settings.rollout_budget.1,
    );
    let ctx = Arc::new(Context {
        client,
        settings,
        stream_context,
        budget,
        waiting: waiting::Waiting::default(),
        index,
        queue,
        metrics,
        health,
        leader: leader.clone(),
        event_sink: Some(event_sink),
        alerter,
        webhook_sender,
        limiter,
        owed_jobs,
        pod_restarts: Default::default(),
        pod_reads: Default::default(),
    });
    // The gauges start at 0, so dashboards and alerts see a series from the start instead of an absence.
    ctx.budget.report(&ctx.metrics.rollouts);
    ctx.waiting.report(&ctx.metrics.waiting);
    let mut workers: Vec<_> =
        (0..ctx.settings.workers.max(1)).map(|_| tokio::spawn(worker(ctx.clone(), leader.clone()))).collect();
    workers.push(tokio::spawn(waiting::tick(ctx.clone())));
    info!(
        scope = ?ctx.settings.watch.scope,
        kinds = ?ctx.settings.watch.sources,
        strategy = ?ctx.settings.strategy,
        auto_reload_all = ctx.settings.decisions.auto_reload_all,
        "Starting Reloader"
    );
    let mut observer = Observer::new(ctx.clone(), infos);
    if let Some(listed) = observer.take_fallback_stream() {
        observations.push(listed.boxed());
    }
    let mut rediscover = tokio::time::interval(ctx.settings.discovery_interval.max(Duration::from_millis(100)));
    rediscover.tick().await;
    let mut was_leader = *leader.borrow();
    let lease = ctx.settings.lease_name.clone();
    ctx.metrics.leader.with_label_values(&[&lease]).set(if was_leader { 1 } else { 0 });
    let mut result = Ok(());
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            changed = leader.changed() => {
                let is_leader = changed.is_ok() && *leader.borrow();
                ctx.metrics.leader.with_label_values(&[&lease]).set(if is_leader { 1 } else { 0 });
                if is_leader && !was_leader {
                    info!("became leader, starting controllers");
                    observer.report_problems();
                    observer.reconcile_all();
                } else if !is_leader && was_leader {
                    warn!("no longer leader, shutting down");
                    ctx.health.set_not_live();
                    result = Err(Stopped::LostLeadership);
                    break;
                } else if changed.is_err() {
                    result = Err(Stopped::ElectionStopped);
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
                    streams::add_sources(&ctx.client, &ctx.settings.watch, &found, &ctx.stream_context, &mut infos, &mut observations);
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
    // The Events of reloads this replica wrote (while it led) are still owed, even when it stops leading now.
    events_flush.within(EVENTS_GRACE).await;
    result
}

/// Splits optional kinds into those whose API is not served and those to watch now.
async fn discover(client: &Client, kinds: &[OptionalKind]) -> (Vec<OptionalKind>, Vec<Source>) {
    let (mut missing, mut present) = (Vec::new(), Vec::new());
    for kind in kinds {
        let served = match client.list_api_group_resources(kind.group_version).await {
            Ok(list) => match kind.configured.and_then(|slot| Some((slot, crate::rules::configured_kinds::get(slot)?)))
            {
                // A configured kind is found by its kind; its CRD says its plural.
                Some((slot, configured)) => {
                    let found = list.resources.iter().find(|r| r.kind == configured.kind && !r.name.contains('/'));
                    found.inspect(|r| crate::rules::configured_kinds::set_plural(slot, &r.name)).is_some()
                }
                None => list.resources.iter().any(|r| r.name == kind.plural),
            },
            Err(e) => {
                debug!(api = kind.group_version, "discovery: {e}");
                false
            }
        };
        if served {
            info!(api = kind.group_version, resource = kind.plural, "API found; watching {}", kind.plural);
            present.extend_from_slice(&kind.sources);
        } else {
            missing.push(kind.clone());
        }
    }
    (missing, present)
}
