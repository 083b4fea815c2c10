//! The observer's part for namespaces' reload windows (`--namespace-reload-windows`, issue 17): a namespace's
//! `reload-window` applies to its workloads that have none of their own; when it changes, the workloads of the
//! namespace that wait are planned again.

use std::time::Instant;

use tracing::{info, warn};

use super::observer::{Lane, Observer};
use crate::{constants::annotation::RELOAD_WINDOW, window::ReloadWindow};

impl Observer {
    pub(super) fn namespace_window(&mut self, stream: usize, name: String, value: Option<String>, listed: bool) {
        if listed && let Some(seen) = self.seen_namespaces.get_mut(&stream) {
            seen.insert(name.clone());
        }
        let window = value.as_deref().and_then(|v| match ReloadWindow::parse(v) {
            Ok(w) => Some(w),
            Err(e) => {
                warn!(namespace = %name, value = %v, "namespace '{name}': annotation {RELOAD_WINDOW:?}: {e}; its \
                      workloads' reloads are not deferred by it");
                None
            }
        });
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
}
