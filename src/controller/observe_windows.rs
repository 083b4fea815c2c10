//! The observer's part for namespaces' reload windows (`--namespace-reload-windows`, issue 17): a namespace's
//! `reload-window` applies to its workloads that have none of their own; when it changes, the workloads of the
//! namespace that wait are planned again.

use std::time::Instant;

use tracing::{info, warn};

use super::observer::{Lane, Observer};
use crate::{constants::annotation::RELOAD_WINDOW, window::ReloadWindow};

impl Observer {
    pub(super) fn namespace_window(&mut self, stream: usize, name: String, value: Option<String>, listed: bool) {
        if let Some(seen) = self.relisting.seen(stream, listed) {
            seen.namespaces.insert(name.clone());
        }
        let parsed = value.as_deref().map(|v| ReloadWindow::parse(v).map_err(|e| (v, e)));
        let window = match parsed {
            Some(Err((v, e))) => {
                self.report_bad_window(&name, v, &e.to_string());
                None
            }
            valid_or_none => {
                self.bad_windows.remove(&name);
                valid_or_none.and_then(Result::ok)
            }
        };
        let shown = window.as_ref().map(ToString::to_string);
        if !self.ctx.index().set_namespace_window(&name, window) {
            return;
        }
        match shown {
            Some(w) => info!(namespace = %name, window = %w, "namespace '{name}' has the reload window {w:?}"),
            None => info!(namespace = %name, "namespace '{name}' has no reload window"),
        }
        let now = Instant::now();
        for key in self.ctx.waiting.in_namespace(&name) {
            self.enqueue(key, now, Lane::Change);
        }
    }

    /// Logs and records an Event for a namespace's invalid `reload-window`, once per value (a namespace's watch
    /// events and relists repeat it).
    fn report_bad_window(&mut self, name: &str, value: &str, error: &str) {
        if self.bad_windows.get(name).is_some_and(|v| v == value) {
            return;
        }
        self.bad_windows.insert(name.to_owned(), value.to_owned());
        let message = format!(
            "namespace '{name}': annotation {RELOAD_WINDOW:?} value {value:?}: {error}; its workloads' reloads are \
             not deferred by it"
        );
        warn!(namespace = %name, value = %value, "{message}");
        if let Some(events) = self.ctx.events() {
            events.invalid_namespace_annotation(name, &message);
        }
    }
}
