//! The observer's triggers: a qualifying change of a resource queues the workloads it may concern (or, with
//! `--webhook-url`, posts instead), and says which key-level readers it leaves alone and why.

use std::time::Instant;

use tracing::info;

use super::{Lane, Observer};
use crate::index::{ConfigKey, Index};
use crate::rules::keyprints::ChangedKeys;

impl Observer {
    /// A qualifying change of `key`: queue the workloads it may concern, or in `--webhook-url` mode send the
    /// webhook instead (upstream v1: for every qualifying change, whether or not a workload matches).
    /// `changed`: the keys the change touched, when known (names only).
    pub(super) fn trigger(&self, index: &Index, key: &ConfigKey, now: Instant, changed: Option<&ChangedKeys>) {
        let keys = changed.map(ToString::to_string).unwrap_or_default();
        if self.ctx.webhook_mode() {
            if let Some(webhook) = self.ctx.webhook()
                && self.active(&key.namespace)
            {
                info!(resource = %key.name, namespace = %key.namespace, changed_keys = %keys,
                      "Changes detected in '{}' of type '{}' in namespace '{}', sending webhook",
                      key.name, key.kind.upstream_type(), key.namespace);
                webhook.webhook(key, changed);
            }
            return;
        }
        // Kinds that cannot be watched are listed first; their result triggers again (fallback.rs).
        self.list_for_change(key);
        self.trigger_known(index, key, now);
        // Key-level readers of none of the changed keys: say why they do not roll (their plan agrees: their keys'
        // hash is unchanged). Removed keys are not named, so then nothing is claimed.
        let Some(changed) = changed.filter(|c| c.removed == 0 && self.active(&key.namespace)) else { return };
        for w in index.candidates(key) {
            let Some(read) = index.keys_read(&w, key) else { continue };
            if changed.names.iter().all(|n| !read.contains(n)) {
                info!(namespace = %key.namespace, workload = %w.name, kind = %w.kind, config = %key.name,
                      changed_keys = %keys, reads = %read.join(", "),
                      "Changes detected in '{}' of type '{}' in namespace '{}' (changed keys {keys}); '{}' of type '{}' reads only {}: not rolled",
                      key.name, key.kind.upstream_type(), key.namespace, w.name, w.kind, read.join(", "));
            }
        }
    }

    /// Queues the indexed workloads a change of `key` may concern.
    pub(super) fn trigger_known(&self, index: &Index, key: &ConfigKey, now: Instant) {
        for w in index.candidates(key) {
            self.enqueue(w, now, Lane::CoalescedChange);
        }
    }
}
