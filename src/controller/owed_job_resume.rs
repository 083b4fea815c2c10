//! The reconcile of a Job with an owed recreation (`crate::workload::owed_jobs`): the entry is settled against the
//! Job now under its name — created, done, waited for or dropped — and what happened is said.

use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::{Context, reconcile_error::Error};
use crate::workload::{self, WorkloadKey};

/// How soon a Job whose replaced Job is still being deleted (a finalizer holds it) is looked at again.
const OWED_JOB_DELETING_RECHECK: Duration = Duration::from_secs(5);

/// Settles what an earlier write left owed for a Job (`workload::owed_jobs`): creates it when it was deleted for a
/// reload and not created again (by this process or one before it), drops an entry that is done, outdated or
/// without a namespace, and says so. `Ok(true)` when it created the Job.
pub(super) async fn resume(ctx: &Context, key: &WorkloadKey) -> Result<bool, Error> {
    if !ctx.write_slot().await {
        return Ok(false);
    }
    let (name, namespace) = (&key.name, &key.namespace);
    let resumed = match workload::resume(&ctx.client, key, &ctx.owed_jobs).await {
        Ok(resumed) => resumed,
        Err(source) => {
            if workload::create_refusal(&source) == Some(workload::CreateRefusal::Quota) {
                let note = format!(
                    "Job '{name}' in namespace '{namespace}' was deleted for a reload and a ResourceQuota refuses \
                     its new Job ({source}); tried again until {:?} after the reload (--rollout-timeout), then \
                     given up: it is never created later than that",
                    ctx.owed_jobs.lifetime()
                );
                warn!(namespace = %namespace, workload = %name, kind = %key.kind, "{note}");
                if let Some(events) = ctx.events() {
                    events.job_not_recreated(key, "RecreateRefused", note);
                }
            }
            return Err(Error::Patch { workload: key.to_string(), resources: "its owed recreation".into(), source });
        }
    };
    match resumed {
        workload::Resumed::Created => {
            info!(namespace = %namespace, workload = %name, kind = %key.kind,
                  "created {} '{name}' in namespace '{namespace}' again: it was deleted for a reload whose create \
                   had not happened", key.kind);
        }
        workload::Resumed::Nothing => {}
        workload::Resumed::Waiting => {
            debug!(workload = %key, "the Job replaced by an owed recreation is still being deleted");
            ctx.queue.add_after(key.clone(), Instant::now(), OWED_JOB_DELETING_RECHECK);
        }
        workload::Resumed::Dropped(workload::Dropped::Created) => {
            info!(namespace = %namespace, workload = %name, kind = %key.kind,
                  "{} '{name}' in namespace '{namespace}' was created again for its reload: its owed recreation \
                   is done", key.kind);
        }
        workload::Resumed::Dropped(workload::Dropped::NotDeleted) => {
            debug!(workload = %key, "the Job of an owed recreation was never deleted: dropped");
        }
        workload::Resumed::Dropped(workload::Dropped::NamespaceGone) => {
            info!(namespace = %namespace, workload = %name, kind = %key.kind,
                  "namespace '{namespace}' is gone: the owed recreation of {} '{name}' is dropped", key.kind);
        }
        workload::Resumed::Dropped(workload::Dropped::Expired) => {
            let note = format!(
                "Job '{name}' in namespace '{namespace}' was deleted for a reload more than {:?} ago \
                 (--rollout-timeout) and is not created again now: it is gone, either created and removed since \
                 (ttlSecondsAfterFinished, a user) or never created; create it by hand if it is still needed",
                ctx.owed_jobs.lifetime()
            );
            warn!(namespace = %namespace, workload = %name, kind = %key.kind, "{note}");
            if let Some(events) = ctx.events() {
                events.job_not_recreated(key, "RecreateAbandoned", note);
            }
        }
    }
    Ok(resumed == workload::Resumed::Created)
}
