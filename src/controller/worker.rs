//! The workers that run reconciles off the queue — only while leading — containing failures (retried with the
//! queue's backoff) and panics.

use std::{panic::AssertUnwindSafe, sync::Arc, time::Instant};

use futures::FutureExt;
use tracing::{error, warn};

use super::{Context, reconcile::reconcile, reconcile_error::Error};

/// The message of a caught panic.
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

pub(super) async fn worker(ctx: Arc<Context>, mut leader: tokio::sync::watch::Receiver<bool>) {
    loop {
        // Non-leaders keep queueing (deduplicated per workload) but never write.
        if leader.wait_for(|l| *l).await.is_err() {
            return;
        }
        let Some((key, mut triggered)) = ctx.queue.next().await else { return };
        if !*leader.borrow() {
            ctx.queue.done(&key);
            ctx.queue.add_again(key, triggered);
            continue;
        }
        let m = &ctx.metrics;
        m.queue_depth.set(i64::try_from(ctx.queue.len()).unwrap_or(i64::MAX));
        m.queue_latency.observe(triggered.at.elapsed().as_secs_f64());
        let started = Instant::now();
        let result = match AssertUnwindSafe(reconcile(&ctx, &key, &mut triggered)).catch_unwind().await {
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
                let (attempt, delay) = ctx.queue.retry(&key, triggered, e.retry_after());
                // Logged at attempts 1, 2, 4, 8, …: a lasting failure (a missing Role) stays visible without
                // a line per workload per backoff period.
                if attempt.is_power_of_two() {
                    // A failed read comes after the rest of the plan was written: only the read is retried.
                    let what = match e {
                        Error::Read { .. } => "key-level view not read (the workload's other reloads are written)",
                        _ => "reload failed",
                    };
                    warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, attempt, ?delay, "{what}, retrying: {e}");
                }
            }
            Err(e) => {
                error!(namespace = %key.namespace, workload = %key.name, kind = %key.kind, "Rolling upgrade failed, not retrying: {e}");
                ctx.queue.forget(&key);
            }
        }
    }
}
