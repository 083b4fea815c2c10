//! The controller's half of `evict-pods` and `delete-pods` (`crate::pod_restarts`): one step per reconcile of a
//! workload whose boundary says pods are still to restart — list its pods, restart the oldest when every other is
//! Ready, and come back through the queue (the one owner of retries) until none is left; then remove the
//! boundary. Everything it decides is read from the cluster, so a restart or failover goes on where it stopped.
//! Under `--max-concurrent-rollouts` a workload holds its slot until its last pod was restarted.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, EvictParams, ListParams},
};
use tracing::{debug, info, warn};

use super::{Context, worker::Error};
use crate::{
    pod_restarts::{Hold, PodFacts, Step, next_step},
    strategy::RolloutStrategy,
    workload::{self, WorkloadKey},
};

/// How often a waiting restart looks again.
const WAIT_POLL: Duration = Duration::from_secs(2);
/// How long a restart blocked by a PodDisruptionBudget waits before asking again.
const BUDGET_POLL: Duration = Duration::from_secs(5);

/// What was said about a workload's restarts, so each is said once per boundary.
#[derive(Default)]
pub(super) struct Announced {
    said: Mutex<HashMap<WorkloadKey, (jiff::Timestamp, Said)>>,
}

#[derive(Clone, Copy, Default)]
struct Said {
    blocked: bool,
    stalled: bool,
}

impl Announced {
    /// True the first time `what` is said for this boundary.
    fn first(&self, key: &WorkloadKey, boundary: jiff::Timestamp, what: fn(&mut Said) -> &mut bool) -> bool {
        let mut said = self.said.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = said.entry(key.clone()).or_insert((boundary, Said::default()));
        if entry.0 != boundary {
            *entry = (boundary, Said::default());
        }
        !std::mem::replace(what(&mut entry.1), true)
    }

    /// Forgets what was said for `key` (its restarts ended, or it is gone).
    pub(super) fn forget(&self, key: &WorkloadKey) {
        self.said.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }
}

/// After a reload wrote `boundary`: the first step once it has passed.
pub(super) fn restart_after(ctx: &Context, key: &WorkloadKey, boundary: jiff::Timestamp) {
    let wait = Duration::try_from(boundary.duration_since(jiff::Timestamp::now())).unwrap_or_default();
    ctx.queue.add_after(key.clone(), Instant::now(), wait.saturating_add(Duration::from_millis(100)));
}

/// One step of `key`'s pod restarts, if it has any; `Ok(true)` when a pod was restarted.
pub(super) async fn step(ctx: &Context, key: &WorkloadKey) -> Result<bool, Error> {
    let Some((written, named)) = ctx.index().pod_restart(key) else { return Ok(false) };
    let boundary = written.at;
    // The boundary stays until every pod was restarted, whatever the annotation says meanwhile: `delete-pods` when
    // it (or the flag) says so, eviction otherwise.
    let strategy = named.filter(|s| s.restarts_pods()).unwrap_or(ctx.settings.rollout_strategy);
    let strategy = if strategy == RolloutStrategy::DeletePods { strategy } else { RolloutStrategy::EvictPods };
    let error = |source| Error::PodRestart { workload: key.to_string(), source };
    let now = jiff::Timestamp::now();
    if now < boundary {
        restart_after(ctx, key, boundary);
        return Ok(false);
    }
    let Some(target) = workload::pod_target(&ctx.client, key).await.map_err(error)? else {
        if ctx.pod_restarts.first(key, boundary, |s| &mut s.stalled) {
            warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                  "{key} has no selector nor template labels: its pods cannot be found to restart them");
        }
        return Ok(false);
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let list = pods.list(&ListParams::default().labels(&target.selector)).await.map_err(error)?;
    let facts: Vec<PodFacts> = list.items.iter().map(pod_facts).collect();
    match next_step(&facts, boundary, now, target.replicas) {
        Step::NotYet(wait) => ctx.queue.add_after(key.clone(), Instant::now(), wait),
        Step::Done => {
            if !ctx.write_slot().await {
                return Ok(false);
            }
            if !workload::clear_pod_restart(&ctx.client, key, &written.text).await.map_err(error)? {
                // A change since wrote a newer boundary, not in the watch yet: its restarts follow when it is.
                debug!(workload = %key, "the boundary {boundary} was replaced meanwhile: left in place");
                ctx.queue.add_after(key.clone(), Instant::now(), Duration::from_millis(500));
                return Ok(false);
            }
            ctx.pod_restarts.forget(key);
            if let Some(next) = ctx.budget.finished(key) {
                ctx.queue.add(next, Instant::now());
            }
            ctx.budget.report(&ctx.metrics.rollouts);
            info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, strategy = strategy.as_str(),
                  "restarted every pod of {} '{}' in namespace '{}' created before {boundary} ({})",
                  key.kind, key.name, key.namespace, strategy.as_str());
        }
        Step::Wait { hold, left } => {
            stalled(ctx, key, boundary, &hold, left, strategy);
            ctx.queue.add_after(key.clone(), Instant::now(), WAIT_POLL);
        }
        Step::Restart { pod, left } => {
            if !ctx.write_slot().await {
                return Ok(false);
            }
            let result = match strategy {
                RolloutStrategy::DeletePods => pods.delete(&pod, &DeleteParams::default()).await.map(|_| ()),
                _ => pods.evict(&pod, &EvictParams::default()).await.map(|_| ()),
            };
            match result {
                Ok(()) => {
                    let done = if strategy == RolloutStrategy::DeletePods { "deleted" } else { "evicted" };
                    info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, pod = %pod, left,
                          strategy = strategy.as_str(),
                          "{done} pod {pod} of {} '{}' in namespace '{}' ({}; {} to restart after it)",
                          key.kind, key.name, key.namespace, strategy.as_str(), left - 1);
                    ctx.queue.add_after(key.clone(), Instant::now(), Duration::from_millis(500));
                    return Ok(true);
                }
                // A PodDisruptionBudget allows no disruption now: wait and ask again, never delete instead.
                Err(kube::Error::Api(s)) if s.code == 429 => {
                    if ctx.pod_restarts.first(key, boundary, |s| &mut s.blocked) {
                        info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, pod = %pod,
                              "evicting pod {pod} of {key} waits: {} ({left} to restart)", s.message);
                    }
                    stalled(ctx, key, boundary, &Hold::NotReady(pod), left, strategy);
                    ctx.queue.add_after(key.clone(), Instant::now(), BUDGET_POLL);
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

/// Past `--rollout-timeout` since the boundary with pods left: says so once (log line, Event); restarts go on.
fn stalled(
    ctx: &Context,
    key: &WorkloadKey,
    boundary: jiff::Timestamp,
    hold: &Hold,
    left: usize,
    strategy: RolloutStrategy,
) {
    let timeout = ctx.settings.rollout_budget.1;
    let late = Duration::try_from(jiff::Timestamp::now().duration_since(boundary)).unwrap_or_default() > timeout;
    if !late || !ctx.pod_restarts.first(key, boundary, |s| &mut s.stalled) {
        return;
    }
    let message = format!(
        "{left} pods of {key} created before {boundary} are not restarted after {}s ({}): {hold}; still trying",
        timeout.as_secs(),
        strategy.as_str()
    );
    warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, "{message}");
    if let Some(events) = ctx.events() {
        events.reload_failed(key, ctx.index().workload_uid(key), &message);
    }
}

fn pod_facts(pod: &Pod) -> PodFacts {
    let created = pod.metadata.creation_timestamp.as_ref().map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0);
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    PodFacts {
        name: pod.metadata.name.clone().unwrap_or_default(),
        created,
        terminating: pod.metadata.deletion_timestamp.is_some(),
        ready,
    }
}
