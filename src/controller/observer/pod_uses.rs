//! The observer's part for kinds without a pod template (`--workload-kind …=-`, issue 29: StrimziPodSets): what
//! their pods use stands for their references. Read from the pods (a LIST by the workload's selector) when the
//! workload is first seen and whenever its `metadata.generation` moves (its owner changed what its pods run),
//! off the observer's path, a few at a time (a relist of thousands of such workloads must not open thousands of
//! LISTs at once); in between, each watch event of the workload keeps the references last read.

use std::time::Instant;

use tracing::warn;

use super::{Lane, Observer};
use crate::{
    controller::Observed,
    index::{Baseline, Index},
    workload::{PodReferences, WorkloadKey, WorkloadSummary},
};

/// How many reads of pods for what they use run at once.
const CONCURRENT_POD_READS: usize = 4;

/// The permits for those reads.
pub(in crate::controller) struct PodReads(tokio::sync::Semaphore);

impl Default for PodReads {
    fn default() -> Self {
        Self(tokio::sync::Semaphore::new(CONCURRENT_POD_READS))
    }
}

/// Gives `summary` (of a kind without a pod template) the references last read for the same workload; true when
/// they must be read (anew): first seen, recreated, or its generation moved.
pub(super) fn carry_pod_uses(index: &Index, key: &WorkloadKey, summary: &mut WorkloadSummary) -> bool {
    match index.workload_summary(key) {
        Some(known) if known.uid == summary.uid => {
            summary.uses.clone_from(&known.uses);
            summary.first_container.clone_from(&known.first_container);
            known.generation != summary.generation
        }
        _ => true,
    }
}

impl Observer {
    /// Reads what `key`'s pods use, and reports it back as an observation.
    pub(super) fn read_pod_uses(&self, key: WorkloadKey, uid: String) {
        let (ctx, tx) = (self.ctx.clone(), self.fallback_tx.clone());
        tokio::spawn(async move {
            // Never closed: a permit always comes.
            let _permit = ctx.pod_reads.0.acquire().await;
            let uses = crate::workload::pod_uses(&ctx.client, &key).await.map_err(|e| e.to_string());
            let _ = tx.unbounded_send(Observed::PodUses { key, uid, uses });
        });
    }

    /// Takes what `key`'s pods use as its references (for the summary with `uid`; a newer one reads again).
    pub(super) fn pod_uses(&mut self, key: WorkloadKey, uid: &str, read: Result<PodReferences, String>, now: Instant) {
        let read = match read {
            Ok(read) => read,
            Err(e) => {
                warn!(namespace = %key.namespace, workload = %key.name, kind = %key.kind,
                      "cannot read the pods of {key} for what they use (read again at its next change): {e}");
                return;
            }
        };
        let mut index = self.ctx.index();
        let Some(mut summary) = index.workload_summary(&key).filter(|s| s.uid == uid).cloned() else { return };
        if (&summary.uses, &summary.first_container) == (&read.uses, &read.first_container) {
            return;
        }
        (summary.uses, summary.first_container) = (read.uses, read.first_container);
        // Newly found references are not changes: what the pods run now is their baseline.
        let update = index.upsert_workload(key.clone(), summary, Baseline::Current);
        drop(index);
        if update.relevant && self.synced {
            self.enqueue(key, now, Lane::Change);
        }
    }
}
