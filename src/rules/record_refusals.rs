//! Kinds and namespaces where the `applied-hashes` record may not be patched (upstream v1's RBAC grants no
//! `patch` on CronJobs and Jobs). A refusal stands for [`RECHECK`]; then the record is tried again with the next
//! write there, so a Role fixed later is seen without a restart. Reloads never depend on it. Kept in
//! [`crate::http::Health`]: the same refusals that skip the record are what `/readyz` reports as degraded.
//!
//! No client, no I/O: a table the writer consults and fills, the caller passes `now`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use crate::rules::keys::WorkloadKind;

/// How long a refused record write stands before the record is tried again.
pub const RECHECK: Duration = Duration::from_secs(10 * 60);
/// A refusal not seen again for this long is forgotten (its namespace may be gone: preview environments come and
/// go); seen again after that, it is logged again.
const FORGET: Duration = Duration::from_secs(60 * 60);

/// When the record was last refused, by kind and namespace.
#[derive(Debug, Default)]
pub struct RecordRefusals(Mutex<HashMap<(WorkloadKind, Arc<str>), Instant>>);

impl RecordRefusals {
    /// True when records may not be written on `kind` in `namespace` at `now`.
    pub fn refused(&self, kind: WorkloadKind, namespace: &Arc<str>, now: Instant) -> bool {
        let refusals = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        refusals.get(&(kind, namespace.clone())).is_some_and(|since| now.duration_since(*since) < RECHECK)
    }

    /// The refusals standing at `now`, by kind and namespace.
    pub fn standing(&self, now: Instant) -> Vec<(WorkloadKind, Arc<str>)> {
        let refusals = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let standing = refusals.iter().filter(|(_, since)| now.duration_since(**since) < RECHECK);
        standing.map(|(key, _)| key.clone()).collect()
    }

    /// Notes a refusal at `now`; true the first time for this kind and namespace (when a user must be told).
    pub fn note(&self, kind: WorkloadKind, namespace: &Arc<str>, now: Instant) -> bool {
        let mut refusals = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        refusals.retain(|_, since| now.duration_since(*since) < FORGET);
        refusals.insert((kind, namespace.clone()), now).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal stands for ten minutes, then the record is tried again; a refusal seen again stands anew and is
    /// not news (the warning is logged once per kind and namespace).
    #[test]
    fn a_refusal_stands_for_a_while_then_the_record_is_tried_again() {
        let refusals = RecordRefusals::default();
        let (ns, other): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let start = Instant::now();
        assert!(!refusals.refused(WorkloadKind::CronJob, &ns, start));
        assert!(refusals.note(WorkloadKind::CronJob, &ns, start), "first refusal");
        assert!(refusals.refused(WorkloadKind::CronJob, &ns, start + RECHECK - Duration::from_secs(1)));
        assert!(!refusals.refused(WorkloadKind::Job, &ns, start), "another kind");
        assert!(!refusals.refused(WorkloadKind::CronJob, &other, start), "another namespace");
        assert!(!refusals.refused(WorkloadKind::CronJob, &ns, start + RECHECK), "tried again after the recheck");
        let again = start + RECHECK + Duration::from_secs(5);
        assert!(!refusals.note(WorkloadKind::CronJob, &ns, again), "refused again: not news");
        assert!(refusals.refused(WorkloadKind::CronJob, &ns, again + RECHECK - Duration::from_secs(1)));
        // Not seen again for an hour (the namespace deleted, say): forgotten with the next refusal anywhere.
        assert!(refusals.note(WorkloadKind::Job, &other, again + FORGET), "another kind and namespace");
        assert_eq!(refusals.0.lock().expect("lock").len(), 1, "the stale refusal is gone");
        assert!(refusals.note(WorkloadKind::CronJob, &ns, again + FORGET), "news again");
    }
}
