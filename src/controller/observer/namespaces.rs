//! The observer's part for namespaces' annotations: a namespace's `reload-window` (`--namespace-reload-windows`,
//! issue 17) applies to its workloads that have none of their own; its `auto`, `ignore` and `pause`
//! (`--namespace-rules`, issue 29) to its workloads that have no value of their own. When either changes, the
//! workloads of the namespace that wait are planned again (a window lifted, a pause lifted).

use std::time::Instant;

use tracing::{info, warn};

use super::{Lane, Observer};
use crate::rules::{decision::NamespaceRules, values::parse_go_bool, window::ReloadWindow};
use crate::{
    constants::annotation::{PAUSE, RELOAD_WINDOW},
    controller::watch::NamespaceValues,
};

impl Observer {
    pub(super) fn namespace_annotations(&mut self, stream: usize, name: String, values: NamespaceValues, listed: bool) {
        if let Some(seen) = self.relisting.seen(stream, listed) {
            seen.namespaces.insert(name.clone());
        }
        let watch = &self.ctx.settings.watch;
        let (windows, rules) = (watch.namespace_windows, watch.namespace_rules);
        let window_changed = windows && self.namespace_window(&name, values.window.as_deref());
        let rules_changed = rules && self.namespace_rules(&name, &values);
        if window_changed || rules_changed {
            let now = Instant::now();
            for key in self.ctx.waiting.in_namespace(&name) {
                self.enqueue(key, now, Lane::Change);
            }
        }
    }

    /// Takes a namespace's `reload-window`; true when it changed.
    fn namespace_window(&mut self, name: &str, value: Option<&str>) -> bool {
        let window = match value.map(|v| ReloadWindow::parse(v).map_err(|e| (v, e))) {
            Some(Err((v, e))) => {
                self.report_bad_value(
                    name,
                    RELOAD_WINDOW,
                    v,
                    &format!("{e}; its workloads' reloads are not deferred by it"),
                );
                None
            }
            valid_or_none => {
                self.bad_namespace_values.remove(&(name.to_owned(), RELOAD_WINDOW.to_owned()));
                valid_or_none.and_then(Result::ok)
            }
        };
        let shown = window.as_ref().map(ToString::to_string);
        if !self.ctx.index().set_namespace_window(name, window) {
            return false;
        }
        match shown {
            Some(w) => info!(namespace = %name, window = %w, "namespace '{name}' has the reload window {w:?}"),
            None => info!(namespace = %name, "namespace '{name}' has no reload window"),
        }
        true
    }

    /// Takes a namespace's `auto`, `ignore` and `pause`; true when they changed.
    fn namespace_rules(&mut self, name: &str, values: &NamespaceValues) -> bool {
        let keys = self.ctx.settings.keys.clone();
        for (key, value) in [(keys.auto.as_str(), &values.auto), (&keys.ignore, &values.ignore), (PAUSE, &values.pause)]
        {
            match value {
                Some(v) if parse_go_bool(v.trim()).is_none() => {
                    self.report_bad_value(name, key, v, "not true or false; treated as absent");
                }
                _ => {
                    self.bad_namespace_values.remove(&(name.to_owned(), key.to_owned()));
                }
            }
        }
        let rules = values.rules();
        let Some(before) = self.ctx.index().set_namespace_rules(name, rules) else { return false };
        let set = |r: NamespaceRules| {
            let on = [("auto", r.auto), ("ignore", r.ignore), ("pause", r.pause)];
            let on: Vec<&str> = on.into_iter().filter(|(_, b)| *b).map(|(n, _)| n).collect();
            if on.is_empty() { "none".to_owned() } else { on.join(", ") }
        };
        info!(namespace = %name, rules = %set(rules), was = %set(before),
              "namespace '{name}' rules for its workloads: {} (were: {})", set(rules), set(before));
        true
    }

    /// Logs and records an Event for a namespace's invalid annotation value, once per value (a namespace's watch
    /// events and relists repeat it).
    fn report_bad_value(&mut self, name: &str, key: &str, value: &str, error: &str) {
        let slot = (name.to_owned(), key.to_owned());
        if self.bad_namespace_values.get(&slot).is_some_and(|v| v == value) {
            return;
        }
        self.bad_namespace_values.insert(slot, value.to_owned());
        let message = format!("namespace '{name}': annotation {key:?} value {value:?}: {error}");
        warn!(namespace = %name, value = %value, "{message}");
        if let Some(events) = self.ctx.events() {
            events.invalid_namespace_annotation(name, &message);
        }
    }
}
