//! The observer's failure handling: a watch that fails is counted, named once per run of failures with what is
//! missing (a verb, an API), reported in `/readyz` and `reloader_watch_failing`, never holds back the others
//! (the first sync proceeds without it), and recovers as soon as it delivers again. A workload kind the
//! controller may not watch falls back to upstream's list-on-change (fallback.rs).

use std::time::Instant;

use tracing::{info, warn};

use super::Observer;
use crate::controller::Source;

impl Observer {
    /// A stream failed: counted, named (one log line per run of failures, with what is missing), reported in
    /// `/readyz` once it keeps failing; it never delays the other streams.
    pub(super) fn failed(&mut self, id: usize, code: Option<u16>, message: &str, now: Instant) {
        let Some(info) = self.infos().get(id).cloned() else { return };
        let m = &self.ctx.metrics;
        m.watch_restarts.with_label_values(&[info.source.api_resource()]).inc();
        m.errors.with_label_values(&["watch_error"]).inc();
        m.watch_failing
            .with_label_values(&[info.source.api_resource(), info.namespace.as_deref().unwrap_or("")])
            .set(1);
        self.errored[id] = true;
        let name = info.to_string();
        // A workload kind that may be listed but not watched is listed on each change instead (fallback.rs):
        // degraded, reported in `/readyz`'s body, not a reason to take the pod out of service. One that may not
        // even be listed (the API server's message says `cannot list`) cannot be reloaded at all.
        let listed_instead =
            code == Some(403) && matches!(info.source, Source::Workload(_)) && !message.contains("cannot list");
        let core = !info.source.is_optional() && !listed_instead;
        if self.ctx.health.source_failed(&name, core, message, now) {
            let cost = match (code, &info.namespace) {
                (Some(403), Some(ns)) => format!(
                    "forbidden: the controller needs list and watch on {} in namespace {ns}",
                    info.source.api_resource()
                ),
                (Some(403), None) => {
                    format!(
                        "forbidden: the controller needs list and watch on {} cluster-wide",
                        info.source.api_resource()
                    )
                }
                (Some(404), _) => format!("{} is not served (its CRD or API was removed?)", info.source.api_resource()),
                _ => "retrying with backoff".to_owned(),
            };
            warn!(source = %name, code, "watch of {name} failed: {cost}; everything else keeps reloading: {message}");
        }
        if code == Some(403) {
            self.enter_fallback(id);
        }
        if code == Some(404) && info.source.is_optional() {
            // The API is gone: so are its objects. The watch keeps retrying and relists when it is back.
            self.prune(id, &super::lists::ListSeen::default());
        }
        self.update_readiness();
        self.first_sync_if_complete();
    }

    /// Stream `id` delivered again: no longer failing.
    pub(super) fn recovered(&mut self, id: usize) {
        self.leave_fallback(id);
        let Some(info) = self.infos().get(id).cloned() else { return };
        self.errored[id] = false;
        let name = info.to_string();
        let labels = [info.source.api_resource(), info.namespace.as_deref().unwrap_or("")];
        self.ctx.metrics.watch_failing.with_label_values(&labels).set(0);
        if self.ctx.health.source_recovered(&name) {
            info!(source = %name, "watch of {name} delivers again");
            self.update_readiness();
        }
    }
}
