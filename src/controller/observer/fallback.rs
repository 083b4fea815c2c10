//! The observer's part for a workload kind the controller may list but not watch: upstream's method (upstream v1's RBAC
//! grants workloads `list, get, update, patch` and no `watch`): once that kind's watch answers 403, every change of a
//! resource LISTs the kind in the resource's namespace (one LIST per kind per change, as upstream v1 does) and
//! reconciles what it finds. A workload first seen that way is treated as not yet rolled with the changed resource's
//! new content, as upstream would reload it. The watch keeps retrying; when it is allowed again, the fallback ends.
//! Also the channel that brings the observations made outside the watches back to the observer (these LISTs, pod reads
//! in `pod_uses.rs`, owed Jobs in `lists.rs`).

use futures::channel::mpsc;
use tracing::{debug, info, warn};

use super::Observer;
use crate::{
    controller::{Observed, Source, watch::FallbackLists},
    index::{Baseline, ConfigKey},
    workload::{WorkloadKind, list_summaries},
};

impl Observer {
    /// Stream `id` may not watch: its kind is listed on changes from now on.
    pub(super) fn enter_fallback(&mut self, id: usize) {
        let Some(info) = self.infos().get(id).cloned() else { return };
        if matches!(info.source, Source::Workload(_)) && self.fallback.insert(id) {
            warn!(source = %info, "watching {info} is forbidden: listing {} in a changed resource's namespace on each \
                  change instead (upstream's method; needs list, costs one LIST per change, and changes to these \
                  workloads' own annotations are seen at the next change)", info.source.api_resource());
        }
    }

    /// Stream `id` delivers again: its watch works, the fallback ends.
    pub(super) fn leave_fallback(&mut self, id: usize) {
        if self.fallback.remove(&id)
            && let Some(info) = self.infos().get(id)
        {
            info!(source = %info, "watching {info} works again: no more listing on changes");
        }
    }

    /// For a change of `key`: LISTs the kinds in fallback covering its namespace, then reports them (and the
    /// change) back as one observation. Returns false when no kind is in fallback there.
    pub(super) fn list_for_change(&self, key: &ConfigKey) -> bool {
        let kinds: Vec<(usize, WorkloadKind)> = self
            .fallback
            .iter()
            .filter_map(|&id| {
                let info = self.infos().get(id)?;
                let covers = info.namespace.as_deref().is_none_or(|ns| ns == &*key.namespace);
                match info.source {
                    Source::Workload(kind) if covers => Some((id, kind)),
                    _ => None,
                }
            })
            .collect();
        if kinds.is_empty() {
            return false;
        }
        let (client, keys, tx, key) =
            (self.ctx.client.clone(), self.ctx.settings.keys.clone(), self.fallback_tx.clone(), key.clone());
        tokio::spawn(async move {
            let mut lists = Vec::new();
            for (id, kind) in kinds {
                let listed =
                    list_summaries(&client, kind, Some(&key.namespace), &keys).await.map_err(|e| e.to_string());
                lists.push((id, listed));
            }
            let _ = tx.unbounded_send(Observed::FallbackListed { config: key, lists });
        });
        true
    }

    /// Applies fallback LISTs: new and changed workloads are indexed, those gone are forgotten, then the change
    /// is acted on.
    pub(super) fn fallback_listed(&mut self, config: ConfigKey, lists: FallbackLists, now: std::time::Instant) {
        let mut index = self.ctx.index();
        let mut gone = Vec::new();
        for (id, listed) in lists {
            let Some(info) = self.infos().get(id) else { continue };
            let Source::Workload(kind) = info.source else { continue };
            let workloads = match listed {
                Ok(w) => w,
                Err(e) => {
                    debug!(source = %info, namespace = %config.namespace, "listing for a change failed: {e}");
                    continue;
                }
            };
            let mut seen = std::collections::HashSet::new();
            for (mut key, summary) in workloads {
                key.namespace = index.intern(&key.namespace);
                let known = index.workload_uid(&key).is_some();
                index.upsert_workload(key.clone(), summary, Baseline::Current);
                if !known {
                    // It existed before this change (upstream would reload it): not rolled with the new content.
                    index.mark_unapplied(&key, &config);
                }
                seen.insert(key);
            }
            gone.extend(index.workloads_of(kind, Some(&config.namespace)).into_iter().filter(|k| !seen.contains(k)));
        }
        drop(index);
        for key in gone {
            self.forget_workload(&key, now);
        }
        let index = self.ctx.index();
        self.update_gauges(&index);
        self.trigger_known(&index, &config, now);
    }
}

/// A channel for observations made outside the watches (fallback LISTs).
pub(super) fn channel() -> (mpsc::UnboundedSender<Observed>, mpsc::UnboundedReceiver<Observed>) {
    mpsc::unbounded()
}
