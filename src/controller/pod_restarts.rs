//! The controller's half of `evict-pods` and `delete-pods` (`crate::rules::pod_restarts`): one step per reconcile of a
//! workload whose boundary says pods are still to restart — list its pods, keep its own (the owner chain), restart
//! the oldest when every other is there and Ready, and come back through the queue (the one owner of retries)
//! until none is left; then remove the boundary. Everything it decides is read from the cluster, so a restart or
//! failover goes on where it stopped. Under `--max-concurrent-rollouts` a workload holds its slot until its last
//! pod was restarted. A pause (workload or Namespace) or a closed reload window stops restarts in progress; a
//! replacement that does not come stops them too, said once it has lasted `--rollout-timeout` (log line,
//! `ReloadFail` Event, `reloader_pod_restarts_stalled`), looked at less and less often (every 2 s for 10 s, then
//! doubling to 30 s; and whenever the workload's watch shows it move), and they go on by themselves.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, EvictParams, ListParams, PostParams},
};
use tracing::{debug, info, warn};

use super::{Context, reconcile_error::Error};
use crate::rules::{
    gates::{self, Wait},
    pod_restarts::{Boundary, Hold, PodFacts, Step, next_step, pods_to_record},
    strategy::RolloutStrategy,
};
use crate::workload::{self, WorkloadKey};

/// How often a waiting restart looks again at first: a replacement usually comes within a few looks.
const WAIT_POLL: Duration = Duration::from_secs(2);
/// Looks at [`WAIT_POLL`] before backing off: each further look at the same wait doubles the delay.
const LOOKS_BEFORE_BACKOFF: u32 = 5;
/// The longest a waiting restart goes without looking again (a GET of the workload and a LIST of its pods).
const WAIT_POLL_MAX: Duration = Duration::from_secs(30);
/// How often restarts stopped by a pause or a closed window look again (the index only: no request).
const GATE_POLL: Duration = Duration::from_secs(30);

/// What this controller remembers of each workload's restarts in progress: what it said, how often it has looked
/// at the same wait, and when they last moved. A cache for what is said and when to look: lost at a restart, it
/// only means a wait is said once more and looked at sooner.
#[derive(Default)]
pub(super) struct Progress {
    by_key: Mutex<HashMap<WorkloadKey, Tracked>>,
}

struct Tracked {
    boundary: jiff::Timestamp,
    /// When the restarts last moved (began, or a pod was restarted): a stall is measured from it.
    moved: Instant,
    /// Looks since then that found them waiting.
    waits: u32,
    blocked_said: bool,
    gated_said: bool,
    stalled: bool,
}

impl Progress {
    fn entry<'a>(
        map: &'a mut MutexGuard<'_, HashMap<WorkloadKey, Tracked>>,
        key: &WorkloadKey,
        boundary: jiff::Timestamp,
    ) -> &'a mut Tracked {
        let fresh = || Tracked {
            boundary,
            moved: Instant::now(),
            waits: 0,
            blocked_said: false,
            gated_said: false,
            stalled: false,
        };
        let entry = map.entry(key.clone()).or_insert_with(fresh);
        if entry.boundary != boundary {
            *entry = fresh();
        }
        entry
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<WorkloadKey, Tracked>> {
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pod was restarted: the waits start over. True when the restarts had been said to be stalled.
    fn moved(&self, key: &WorkloadKey, boundary: jiff::Timestamp) -> bool {
        let mut map = self.lock();
        let t = Self::entry(&mut map, key, boundary);
        t.moved = Instant::now();
        t.waits = 0;
        t.gated_said = false;
        std::mem::take(&mut t.stalled)
    }

    /// They wait (again): how long until the next look, and whether they have now waited past `timeout` since
    /// they last moved (true once, until they move again).
    fn waited(&self, key: &WorkloadKey, boundary: jiff::Timestamp, timeout: Duration) -> (Duration, bool) {
        let mut map = self.lock();
        let t = Self::entry(&mut map, key, boundary);
        let doublings = t.waits.saturating_sub(LOOKS_BEFORE_BACKOFF).min(4);
        let delay = WAIT_POLL.saturating_mul(1 << doublings).min(WAIT_POLL_MAX);
        t.waits = t.waits.saturating_add(1);
        let newly_stalled = !t.stalled && t.moved.elapsed() > timeout;
        t.stalled |= newly_stalled;
        (delay, newly_stalled)
    }

    /// True the first time a PodDisruptionBudget is said to block them (per boundary).
    fn first_blocked(&self, key: &WorkloadKey, boundary: jiff::Timestamp) -> bool {
        let mut map = self.lock();
        !std::mem::replace(&mut Self::entry(&mut map, key, boundary).blocked_said, true)
    }

    /// True the first time a gate is said to stop them (until they move again).
    fn first_gated(&self, key: &WorkloadKey, boundary: jiff::Timestamp) -> bool {
        let mut map = self.lock();
        !std::mem::replace(&mut Self::entry(&mut map, key, boundary).gated_said, true)
    }

    /// Forgets `key` (its restarts ended, or it is gone), and sets `reloader_pod_restarts_stalled`.
    pub(super) fn forget(&self, key: &WorkloadKey, gauge: &prometheus::IntGauge) {
        if self.lock().remove(key).is_some_and(|t| t.stalled) {
            self.report(gauge);
        }
    }

    /// Sets `reloader_pod_restarts_stalled`.
    fn report(&self, gauge: &prometheus::IntGauge) {
        let stalled = self.lock().values().filter(|t| t.stalled).count();
        gauge.set(i64::try_from(stalled).unwrap_or(i64::MAX));
    }
}

/// After a reload wrote `boundary`: the first step once it has passed.
pub(super) fn restart_after(ctx: &Context, key: &WorkloadKey, boundary: jiff::Timestamp) {
    let wait = Duration::try_from(boundary.duration_since(crate::client::server_clock::now())).unwrap_or_default();
    ctx.queue.add_after(key.clone(), Instant::now(), wait.saturating_add(Duration::from_millis(100)));
}

/// A pause (the workload's or its Namespace's) or a closed reload window: restarts in progress stop as reloads do.
fn gate_closed(ctx: &Context, key: &WorkloadKey) -> Option<Wait> {
    let rollout_gates = ctx.index().workload_gates(key)?;
    gates::gate(&rollout_gates, false, &[], jiff::Timestamp::now())
}

/// One step of `key`'s pod restarts, if it has any; `Ok(true)` when a pod was restarted.
pub(super) async fn step(ctx: &Context, key: &WorkloadKey) -> Result<bool, Error> {
    let Some((written, named)) = ctx.index().pod_restart(key) else {
        // None, or the boundary was removed by hand: nothing is stalled here any more.
        ctx.pod_restarts.forget(key, &ctx.metrics.pod_restarts_stalled);
        return Ok(false);
    };
    let boundary = written.at;
    // The boundary stays until every pod was restarted, whatever the annotation says meanwhile: `delete-pods` when
    // it (or the flag) says so, eviction otherwise.
    let strategy = named.filter(|s| s.restarts_pods()).unwrap_or(ctx.settings.rollout_strategy);
    let strategy = if strategy == RolloutStrategy::DeletePods { strategy } else { RolloutStrategy::EvictPods };
    let error = |source| Error::PodRestart { workload: key.to_string(), source };
    // The boundary is the API server's time (the change's), and so are the pods' creation times it is compared
    // with: waited for by the API server's clock, not this host's.
    let now = crate::client::server_clock::now();
    if now < boundary {
        restart_after(ctx, key, boundary);
        return Ok(false);
    }
    if let Some(wait) = gate_closed(ctx, key) {
        if ctx.pod_restarts.first_gated(key, boundary) {
            info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                  "the pod restarts of {key} stop while it waits: {wait}");
        }
        ctx.queue.add_after(key.clone(), Instant::now(), GATE_POLL);
        return Ok(false);
    }
    let Some(target) = workload::pod_target(&ctx.client, key).await.map_err(error)? else {
        if ctx.pod_restarts.first_blocked(key, boundary) {
            warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                  "{key} has no selector nor template labels: its pods cannot be found to restart them");
        }
        return Ok(false);
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let list = pods.list(&ListParams::default().labels(&target.selector)).await.map_err(error)?;
    let owners = workload::pod_owners(&ctx.client, &key.namespace, &target, &list.items).await.map_err(error)?;
    let facts: Vec<PodFacts> = list.items.iter().map(|p| pod_facts(p, workload::is_owned(p, &owners))).collect();
    let Some(want) = target.replicas.or(written.pods.map(i64::from)) else {
        // Neither its spec nor its status says how many pods it should have: the first step records how many it
        // has, before any is restarted, so that one that is not replaced is seen missing.
        if !ctx.write_slot().await {
            return Ok(false);
        }
        let counted = Boundary::new(boundary, Some(pods_to_record(&facts)));
        let recorded = workload::record_pod_count(&ctx.client, key, &written.text, &counted.text);
        if recorded.await.map_err(error)? {
            debug!(workload = %key, "recorded the pods to restart with the boundary: {}", counted.text);
        }
        // Either way the watch shows the boundary to go on from.
        ctx.queue.add_after(key.clone(), Instant::now(), Duration::from_millis(500));
        return Ok(false);
    };
    match next_step(&facts, boundary, now, want) {
        Step::NotYet(wait) => ctx.queue.add_after(key.clone(), Instant::now(), wait),
        Step::Done => {
            if !ctx.write_slot().await {
                return Ok(false);
            }
            if !facts.is_empty() && !facts.iter().any(|p| p.owned) {
                // A Knative Service's pods belong to its Revisions; a bare pod to nothing: never restarted for it.
                warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                      "none of the {} pods {key}'s selector finds is its own (their controller is another object): \
                       none is restarted; use a template rollout strategy for it", facts.len());
            }
            if !workload::clear_pod_restart(&ctx.client, key, &written.text).await.map_err(error)? {
                // A change since wrote a newer boundary, not in the watch yet: its restarts follow when it is.
                debug!(workload = %key, "the boundary {boundary} was replaced meanwhile: left in place");
                ctx.queue.add_after(key.clone(), Instant::now(), Duration::from_millis(500));
                return Ok(false);
            }
            ctx.pod_restarts.forget(key, &ctx.metrics.pod_restarts_stalled);
            if let Some(next) = ctx.budget.finished(key) {
                ctx.queue.add(next, Instant::now());
            }
            ctx.budget.report(&ctx.metrics.rollouts);
            info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, strategy = strategy.as_str(),
                  "restarted every pod of {} '{}' in namespace '{}' created before {boundary} ({})",
                  key.kind, key.name, key.namespace, strategy.as_str());
        }
        Step::Wait { hold, left } => waits(ctx, key, boundary, &hold, left, strategy),
        Step::Restart { pod, left } => {
            if !ctx.write_slot().await {
                return Ok(false);
            }
            match restart(&pods, &pod, strategy).await {
                Ok(()) => {
                    let done = if strategy == RolloutStrategy::DeletePods { "deleted" } else { "evicted" };
                    info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, pod = %pod, left,
                          strategy = strategy.as_str(),
                          "{done} pod {pod} of {} '{}' in namespace '{}' ({}; {} to restart after it)",
                          key.kind, key.name, key.namespace, strategy.as_str(), left - 1);
                    if ctx.pod_restarts.moved(key, boundary) {
                        info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                              "the pod restarts of {key} go on");
                        ctx.pod_restarts.report(&ctx.metrics.pod_restarts_stalled);
                    }
                    ctx.queue.add_after(key.clone(), Instant::now(), Duration::from_millis(500));
                    return Ok(true);
                }
                // A PodDisruptionBudget allows no disruption now: wait and ask again, never delete anyway.
                Err(kube::Error::Api(s)) if s.code == 429 => {
                    if ctx.pod_restarts.first_blocked(key, boundary) {
                        info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, pod = %pod,
                              "{} pod {pod} of {key} waits: {} ({left} to restart)",
                              if strategy == RolloutStrategy::DeletePods { "deleting" } else { "evicting" },
                              s.message);
                    }
                    waits(ctx, key, boundary, &Hold::NotReady(pod), left, strategy);
                }
                // Gone meanwhile: the next step finds its replacement.
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    ctx.queue.add_after(key.clone(), Instant::now(), Duration::from_millis(200));
                }
                Err(e) => return Err(error(e)),
            }
        }
    }
    Ok(false)
}

/// Restarts `pod`: evicts it, or (`delete-pods`) deletes it where an eviction would be allowed — a dry-run
/// eviction asks its PodDisruptionBudgets first (429 when one allows no disruption now).
async fn restart(pods: &Api<Pod>, pod: &str, strategy: RolloutStrategy) -> Result<(), kube::Error> {
    if strategy == RolloutStrategy::DeletePods {
        let ask = EvictParams {
            post_options: PostParams { dry_run: true, ..PostParams::default() },
            ..EvictParams::default()
        };
        pods.evict(pod, &ask).await?;
        pods.delete(pod, &DeleteParams::default()).await.map(|_| ())
    } else {
        pods.evict(pod, &EvictParams::default()).await.map(|_| ())
    }
}

/// The restarts wait: look again later (backing off while the wait lasts); once they have waited
/// `--rollout-timeout` since they last moved, say so (log line, Event, `reloader_pod_restarts_stalled`).
fn waits(
    ctx: &Context,
    key: &WorkloadKey,
    boundary: jiff::Timestamp,
    hold: &Hold,
    left: usize,
    strategy: RolloutStrategy,
) {
    let timeout = ctx.settings.rollout_budget.1;
    let (delay, stalled) = ctx.pod_restarts.waited(key, boundary, timeout);
    ctx.queue.add_after(key.clone(), Instant::now(), delay);
    if !stalled {
        return;
    }
    ctx.pod_restarts.report(&ctx.metrics.pod_restarts_stalled);
    let message = format!(
        "{left} pods of {key} created before {boundary} are not restarted: none restarted for {}s ({}): {hold}; \
         stopped until it changes",
        timeout.as_secs(),
        strategy.as_str()
    );
    warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, "{message}");
    if let Some(events) = ctx.events() {
        events.reload_failed(key, ctx.index().workload_uid(key), &message);
    }
}

fn pod_facts(pod: &Pod, owned: bool) -> PodFacts {
    let created = pod.metadata.creation_timestamp.as_ref().map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0);
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    PodFacts {
        name: pod.metadata.name.clone().unwrap_or_default(),
        created,
        terminating: pod.metadata.deletion_timestamp.is_some(),
        ready,
        owned,
    }
}
