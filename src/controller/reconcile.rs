//! One reconcile of one workload: plan from the index, write once, report (metrics, Event, log line, alert).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use tracing::{debug, info, warn};

use super::{Context, queue::Trigger, reconcile_error::Error};
use crate::rules::{
    pause::{self, PauseAction},
    strategy::{RolloutStrategy, TemplateChange, encode_applied_hashes},
};
use crate::{
    constants::APPLIED_HASHES_BUDGET,
    index::PlannedReload,
    workload::{self, WorkloadKey, WorkloadWrite},
};

/// Plans `key`; when key-level reloads need views the index lacks, reads those resources once and plans again
/// (a pair still without a view is left out: the watch event of its next content brings one). A failed read
/// holds back only the pairs it was for: the plan without them is returned with the error, so the workload's
/// other reloads are written and the read is retried after them.
async fn plan_with_views(
    ctx: &Context,
    key: &WorkloadKey,
    plan: impl Fn() -> crate::index::WorkloadPlan,
) -> (crate::index::WorkloadPlan, Option<Error>) {
    let first = plan();
    if first.views_needed.is_empty() {
        return (first, None);
    }
    let resources = first.views_needed.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let unread = super::read_views::read_views(ctx, &first.views_needed).await.err();
    (plan(), unread.map(|source| Error::Read { workload: key.to_string(), resources, source }))
}

/// Plans and writes one workload; `Ok(false)` when there was nothing to write. A view that could not be read is
/// reported (and the workload retried) after the rest of the plan was written.
pub(super) async fn reconcile(ctx: &Context, key: &WorkloadKey, triggered: &mut Trigger) -> Result<bool, Error> {
    if ctx.webhook_mode() {
        // `--webhook-url`: notify instead of reloading; level-triggered reconciles must not write either.
        return Ok(false);
    }
    if ctx.queue.coalescing(key) {
        // A resource change is waiting for quiet (a run taken off the queue before it came): the run when it is
        // due writes it with the changes still to come; written now, those would roll the workload again.
        return Ok(false);
    }
    // A Job with an owed recreation (or gone from the watch) settles the entry first: created, done or dropped
    // by what is under its name now (issue 38, finding 7), before anything is planned for it.
    if ctx.owed_jobs.may_owe(key) && (ctx.owed_jobs.pending(key) || !ctx.index().has_workload(key)) {
        let created = super::owed_job_resume::resume(ctx, key).await?;
        if created || !ctx.index().has_workload(key) {
            return Ok(created);
        }
    }
    let plan = || ctx.index().plan(key, ctx.settings.decisions, ctx.settings.strategy);
    let (plan, unread) = plan_with_views(ctx, key, plan).await;
    let written = write_plan(ctx, key, triggered, plan).await?;
    // Pods still to restart (evict-pods, delete-pods): one step each reconcile, also after a restart.
    let restarted = super::pod_restarts::step(ctx, key).await?;
    unread.map_or(Ok(written || restarted), Err)
}

/// Writes `plan` (with the pause action and gates it meets); `Ok(false)` when there was nothing to write. Three
/// steps, each rule in one of them: [`decide`] what is written (pause, suspension, refused records, gates, budget,
/// the pod boundary), [`write`] it (one PATCH, and its fallbacks), [`report`] what happened (metrics, Events,
/// alerts, log lines, the index and the budget told).
async fn write_plan(
    ctx: &Context,
    key: &WorkloadKey,
    triggered: &mut Trigger,
    plan: crate::index::WorkloadPlan,
) -> Result<bool, Error> {
    let Some(mut decided) = decide(ctx, key, plan, triggered.wall) else { return Ok(false) };
    let record_only = decided.plan.reloads.is_empty() && decided.pause.is_none();
    let Some(result) = write(ctx, key, triggered, &mut decided).await else {
        return Ok(stepped_down(ctx, key, *triggered));
    };
    let written = report(ctx, key, triggered, &decided, result)?;
    if record_only && written {
        // A first-sight record of the full reconcile: the next one waits its turn (queue.rs, RECORD_PACE).
        ctx.queue.pace_background(key);
    }
    Ok(written)
}

/// What a reconcile writes, once every rule before the write has decided.
struct Decided<'a> {
    plan: crate::index::WorkloadPlan,
    /// The workload's UID (for Events).
    uid: Option<String>,
    rollout_strategy: RolloutStrategy,
    cronjob_reload: workload::CronJobReload,
    /// A Deployment's `pause-period` action: the `paused-at` key and what to do.
    pause: Option<(&'a str, PauseAction)>,
    /// `evict-pods`/`delete-pods`: the boundary written instead of a template change.
    pod_boundary: Option<crate::rules::pod_restarts::Boundary>,
}

/// Applies the rules that come before a write to `plan` (triggered at `seen`): `None` when nothing is to be written
/// now (nothing to write, a suspended CronJob without a record, a gate, the restart budget).
fn decide<'a>(
    ctx: &'a Context,
    key: &WorkloadKey,
    mut plan: crate::index::WorkloadPlan,
    seen: jiff::Timestamp,
) -> Option<Decided<'a>> {
    let (pause_state, uid, rollout_strategy, cronjob_reload) = {
        let index = ctx.index();
        (index.pause_state(key), index.workload_uid(key), index.rollout_strategy(key), index.cronjob_reload(key))
    };
    let facts = key.kind.facts();
    let rollout_strategy = rollout_strategy.unwrap_or(ctx.settings.rollout_strategy).for_kind(&facts);
    let suspended = pause_state.as_ref().is_some_and(|p| workload::spawns_nothing(&facts, p, cronjob_reload));
    let pause = match pause_state {
        Some(state) if facts.pause_period => pause::evaluate(&state, !plan.reloads.is_empty(), jiff::Timestamp::now()),
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
    if ctx.health.records_refused.refused(key.kind, &key.namespace, Instant::now()) {
        plan.applied_hashes = None;
    }
    if suspended && !plan.reloads.is_empty() {
        // Record only: resuming the CronJob must not spawn this change later (cronjob.rs, spawns_nothing). Without a
        // record (no `patch` on CronJobs here), nothing remembers it: it is spawned once the CronJob is resumed.
        let resources: Vec<String> = plan.reloads.iter().map(|r| format!("'{}'", r.config.name)).collect();
        let recorded = if plan.applied_hashes.is_some() { "recorded" } else { "not recorded (no record here)" };
        info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
              "{} '{}' in namespace '{}' is suspended: no Job is spawned for the change of {} ({recorded})",
              key.kind, key.name, key.namespace, resources.join(", "));
        ctx.metrics.skipped.with_label_values(&["suspended"]).inc();
        plan.applied_hashes.as_ref()?;
        plan.reloads.clear();
    }
    if plan.is_empty() && pause.is_none() {
        ctx.metrics.skipped.with_label_values(&["strategy_not_updated"]).inc();
        return None;
    }
    if !plan.reloads.is_empty() {
        if let Some(wait) = super::waiting::check(ctx, key, &plan.reloads, uid.clone()) {
            // A rollout gate (issue 17): planned again when what it waits for moves (waiting.rs).
            ctx.metrics.skipped.with_label_values(&[wait.label()]).inc();
            return None;
        }
        // A write that starts no rollout its status would show (CronJobs, Jobs, a custom kind without a status
        // rule, an `OnDelete` StatefulSet or DaemonSet) takes no slot; restarting its pods does.
        let rolls = rollout_strategy.restarts_pods()
            || ctx.index().rollout(key).is_some_and(|(state, _)| state != workload::RolloutState::Untracked);
        let admission = if rolls { ctx.budget.admit(key, Instant::now()) } else { super::budget::Admission::Go };
        ctx.budget.report(&ctx.metrics.rollouts);
        if admission == super::budget::Admission::Wait {
            // Over --max-concurrent-rollouts: queued again when a slot frees.
            debug!(workload = %key, "waiting for a slot in --max-concurrent-rollouts");
            ctx.metrics.skipped.with_label_values(&["rollout_budget"]).inc();
            return None;
        }
    }
    // evict-pods / delete-pods: the template is not written; the boundary is, and the pods are restarted after.
    // It follows the newest change as the API server stamped it, not when this controller saw it: one that starts
    // after a change must not count the pods created since as old (issue 29). Unknown (a deletion, a CSI version):
    // when seen. It never moves back, and keeps the pod count restarts in progress recorded.
    let pod_boundary = (rollout_strategy.restarts_pods() && !plan.reloads.is_empty()).then(|| {
        let changes = plan.reloads.iter().map(|r| r.written_at.unwrap_or(seen));
        let at = crate::rules::pod_restarts::boundary(changes.max().unwrap_or(seen));
        let current = ctx.index().pod_restart(key).map(|(b, _)| b);
        crate::rules::pod_restarts::Boundary::advanced(current.as_ref(), at)
    });
    Some(Decided { plan, uid, rollout_strategy, cronjob_reload, pause, pod_boundary })
}

/// Writes what was decided: one PATCH (or a Job's recreation), and when the API server refuses only the
/// `applied-hashes` record, the reload without it. `None` when leadership ended before the write.
async fn write(
    ctx: &Context,
    key: &WorkloadKey,
    triggered: &mut Trigger,
    decided: &mut Decided<'_>,
) -> Option<Result<Option<i64>, kube::Error>> {
    let plan = &mut decided.plan;
    let changes: Vec<TemplateChange> = match decided.pod_boundary {
        Some(_) => Vec::new(),
        None => plan.reloads.iter().map(template_change).collect(),
    };
    let write = WorkloadWrite {
        strategy: ctx.settings.strategy,
        changes: &changes,
        // The wall-clock time of the trigger, fixed in its queue entry, not of this attempt: a retry after a lost
        // response writes the same `observedAt` / `restartAt` again, which changes nothing, instead of a second
        // rollout — unless it carries newer content, which takes a later time (`Trigger::mark_for`).
        changed_at: triggered.mark_for(content_fingerprint(&plan.reloads), jiff::Timestamp::now()),
        applied_hashes: plan.applied_hashes.as_ref().map(encode_applied_hashes),
        pause: decided.pause.clone(),
        restart: decided.rollout_strategy == RolloutStrategy::Restart,
        restart_pods_before: decided.pod_boundary.as_ref().map(|b| b.text.to_string()),
        cronjob_reload: decided.cronjob_reload,
        owed_jobs: Some(&ctx.owed_jobs),
    };
    if !ctx.write_slot().await {
        return None;
    }
    let mut result = workload::write(&ctx.client, key, &write).await;
    if let Err(error) = result {
        result = confirm_lost_answer(ctx, key, &write, error).await;
    }
    if let Err(kube::Error::Api(status)) = &result
        && write.applied_hashes.is_some()
        // A record-only write refused as invalid stays an error (reported once, then left until something
        // changes); without the permission to patch, the kind is recorded as such below.
        && (status.code == 403 || (status.code == 422 && !plan.reloads.is_empty()))
    {
        // The record never blocks the reload: annotations at their 256 KiB limit (a large
        // `last-applied-configuration`: 422), or no `patch` on the kind (upstream v1's RBAC on CronJobs and
        // Jobs: 403). Reload without it; restart-safety for this workload then rests on the template's records.
        let (code, message) = (status.code, status.message.clone());
        // A record the object still carries would now be older than its template, and the record is trusted
        // first: replace it by an empty one (smaller, so it fits where the full one did not).
        let cleared = (code == 422 && plan.object_has_record).then(BTreeMap::new);
        plan.applied_hashes = cleared;
        plan.unrecorded = 0; // reported below as a rejected record, not as one cut to its budget
        result = if plan.reloads.is_empty() {
            Ok(None)
        } else if !ctx.write_slot().await {
            return None;
        } else {
            let applied_hashes = plan.applied_hashes.as_ref().map(encode_applied_hashes);
            workload::write(&ctx.client, key, &WorkloadWrite { applied_hashes, ..write.clone() }).await
        };
        if code == 403 && result.is_ok() {
            // Only the record was refused: the kind may not be patched here. It is tried again after a while (a Role
            // fixed later); reloads are not affected either way. Degraded, not down: a log line once, the
            // counter, and `/readyz`'s body while it stands.
            ctx.metrics.errors.with_label_values(&["record_refused"]).inc();
            if ctx.health.records_refused.note(key.kind, &key.namespace, Instant::now()) {
                warn!(kind = %key.kind, namespace = %key.namespace, "no patch permission on {} in namespace {}: the \
                      restart-safety record is not written there (tried again every {} minutes), so a change made \
                      while the controller is down is not applied to {} workloads that were never reloaded \
                      ({message})", key.kind.facts().api_resource, key.namespace,
                      crate::rules::record_refusals::RECHECK.as_secs() / 60, key.kind);
            } else {
                debug!(kind = %key.kind, namespace = %key.namespace, "the restart-safety record is still refused");
            }
        } else if code == 422 && result.is_ok() {
            warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                  "the applied-hashes record was rejected ({message}); reloaded without it");
        }
    }
    if plan.unrecorded > 0 && plan.applied_hashes.is_some() && result.is_ok() {
        warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, left_out = plan.unrecorded,
              "the applied-hashes record is limited to {} bytes: {} resources are not recorded, so a change to them \
               made while the controller is down is not applied when it starts", APPLIED_HASHES_BUDGET, plan.unrecorded);
    }
    Some(result)
}

/// A write that failed in a way that may follow an applied write (a 5xx, a lost connection: the answer lost, not
/// the write) is read back: when the workload carries what it set, it landed whole and is reported as the reload
/// it was — its Event, its metrics, its budget slot held for the rollout it started — instead of a failure whose
/// retry finds nothing left to do (issue 38). Otherwise, or when it cannot be read, the error stands.
async fn confirm_lost_answer(
    ctx: &Context,
    key: &WorkloadKey,
    write: &WorkloadWrite<'_>,
    error: kube::Error,
) -> Result<Option<i64>, kube::Error> {
    if !crate::client::outcome_unknown(&error) {
        return Err(error);
    }
    match workload::landed(&ctx.client, key, write).await {
        Ok(Some(generation)) => {
            ctx.metrics.errors.with_label_values(&["answer_lost"]).inc();
            info!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                  "the answer to the write of {key} was lost ({error}); read back, the workload carries it: written");
            Ok(generation)
        }
        Ok(None) => Err(error),
        Err(read) => {
            debug!(workload = %key, "the answer to the write was lost and the workload could not be read: {read}");
            Err(error)
        }
    }
}

/// Reports what the write did: metrics, the budget's slot, `ReloadFail` or `Reloaded` Events, alerts and log
/// lines, all from the same planned reloads; the index learns what was written (or permanently rejected).
fn report(
    ctx: &Context,
    key: &WorkloadKey,
    triggered: &Trigger,
    decided: &Decided<'_>,
    result: Result<Option<i64>, kube::Error>,
) -> Result<bool, Error> {
    let Decided { plan, uid, rollout_strategy, cronjob_reload, pause, pod_boundary } = decided;
    let kind = key.kind.to_string();
    let m = &ctx.metrics;
    if !plan.reloads.is_empty() && !matches!(&result, Err(kube::Error::Api(s)) if s.code == 404) {
        let ok = result.is_ok();
        m.reload_executed(ok, &key.namespace);
        m.action.with_label_values(&[kind.as_str(), if ok { "success" } else { "error" }]).inc();
        if ok {
            m.action_latency.with_label_values(&[&kind]).observe(triggered.at.elapsed().as_secs_f64());
            m.workloads_matched.with_label_values(&[&kind]).inc();
        } else {
            m.errors.with_label_values(&["handler_error"]).inc();
        }
    }
    match result {
        Ok(generation) => {
            // Pods restarted instead: the slot is held until the last one was (pod_restarts.rs).
            if !plan.reloads.is_empty() && pod_boundary.is_none() {
                // The slot is held until the rollout of the generation this write produced completes; a write
                // that changed no template (a retry after a lost response) frees it at once.
                let rollout = ctx.index().rollout(key);
                if let Some(next) = ctx.budget.written(key, generation, rollout) {
                    ctx.queue.add(next, Instant::now());
                }
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            debug!(workload = %key, "workload is gone; nothing to reload");
            return Ok(false);
        }
        Err(source) => {
            if let Some(next) = ctx.budget.write_failed(key) {
                ctx.queue.add(next, Instant::now());
            }
            if let Some(events) = ctx.events() {
                events.reload_failed(key, uid.clone(), &source.to_string());
            }
            if workload::create_refusal(&source) == Some(workload::CreateRefusal::Quota) {
                // A Job's new one refused by a quota: before the delete (its dry run) the Job is left as it is;
                // after it, what is owed is tried again until the entry's lifetime ends.
                let then = if ctx.owed_jobs.pending(key) {
                    format!(
                        "it was deleted, and its new Job is tried again until {:?} after the reload \
                             (--rollout-timeout), then given up",
                        ctx.owed_jobs.lifetime()
                    )
                } else {
                    "the reload is tried again; a Job is deleted for it only once its new Job would be admitted".into()
                };
                warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                      "a ResourceQuota in namespace '{}' refuses the new Job of {} '{}' ({source}): {then}",
                      key.namespace, key.kind, key.name);
            }
            let resources = plan.reloads.iter().map(|r| r.config.to_string()).collect::<Vec<_>>().join(", ");
            let resources = if resources.is_empty() { "its applied-hashes record".to_owned() } else { resources };
            let error = Error::Patch { workload: key.to_string(), resources, source };
            if !error.is_transient() {
                ctx.index().mark_rejected(key, plan);
            }
            return Err(error);
        }
    }
    ctx.index().mark_written(key, plan);
    if let Some(boundary) = pod_boundary {
        super::pod_restarts::restart_after(ctx, key, boundary.at);
    }
    let latency_ms = triggered.at.elapsed().as_secs_f64() * 1000.0;
    match pause {
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
    // What ran, in the log: the rollout strategy, or for a CronJob its `cronjob-reload` mode.
    let ran = if key.kind.facts().cronjob_reload { cronjob_reload.as_str() } else { rollout_strategy.as_str() };
    for r in &plan.reloads {
        let changed = r.changed_keys.as_deref();
        if let Some(events) = ctx.events() {
            // The Event says how when it is not upstream's way (a template mark, a spawned Job, a recreated Job).
            let how = Some(ran).filter(|r| !matches!(*r, "rollout" | "spawn"));
            events.reloaded(key, uid.clone(), (&r.config.name, r.config.kind.upstream_type()), changed, how);
        }
        if let Some(alerts) = ctx.alerts() {
            alerts.reloaded(&crate::alerts::payload::ReloadAlert {
                resource: &r.config.name,
                resource_type: r.config.kind.upstream_type(),
                workload: &key.name,
                kind: &key.kind.to_string(),
                namespace: &key.namespace,
                changed,
            });
        }
        let changed_keys = changed.map(ToString::to_string).unwrap_or_default();
        info!(
            namespace = %key.namespace, workload = %key.name, kind = %key.kind,
            config = %r.config.name, config_kind = %r.config.kind, reason = %r.reason, latency_ms,
            deleted = r.deleted, changed_keys = %changed_keys, rollout_strategy = %ran,
            "Changes detected in '{}' of type '{}' in namespace '{}'; updated '{}' of type '{}' in namespace '{}'",
            r.config.name, r.config.kind.upstream_type(), r.config.namespace, key.name, key.kind, key.namespace
        );
    }
    Ok(true)
}

/// Leadership ended while waiting to write: nothing is written; the budget slot is given back and the workload
/// is queued again, for when (and if) this replica leads again. Returns `false`: nothing was written.
fn stepped_down(ctx: &Context, key: &WorkloadKey, triggered: Trigger) -> bool {
    debug!(workload = %key, "no longer leader: not writing");
    if let Some(next) = ctx.budget.write_failed(key) {
        ctx.queue.add(next, Instant::now());
    }
    ctx.queue.add_again(key.clone(), triggered);
    false
}

/// What a write carries, for [`Trigger::mark_for`]: each resource with the hash written for it.
fn content_fingerprint(reloads: &[PlannedReload]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for r in reloads {
        (&r.config, r.value, r.deleted).hash(&mut hasher);
    }
    hasher.finish()
}

fn template_change(r: &PlannedReload) -> TemplateChange {
    TemplateChange {
        kind: r.config.kind,
        // `<namespace>/<name>` for a resource of another namespace: its own `STAKATER_*` variable.
        name: r.pair.1.clone(),
        namespace: r.config.namespace.to_string(),
        hash: r.value,
        container: r.container.clone(),
        deleted: r.deleted,
    }
}
