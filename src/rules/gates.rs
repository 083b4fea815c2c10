//! Rollout gates (issue 17): whether a reload the plan wants may be written now, or waits — held because the
//! same change already failed to roll out elsewhere, behind a lower rollout wave, or outside its reload window.
//! Pure: the controller and `explain` give the facts and reuse the answer (its `Display` is the reason both
//! print). The restart budget (`--max-concurrent-rollouts`) is the controller's own state and is checked after.
//!
//! Upstream Reloader has none of these (upstream #179, #433, #507, #579, #1109): every workload using a resource
//! rolls the moment it changes. With no gate annotation and `--halt-on-failed-rollout` off, [`gate`] always
//! answers `None` and nothing changes.

use std::collections::BTreeMap;

use crate::constants::annotation;
use crate::rules::{
    keys::{ConfigKey, RolloutState, WorkloadKey},
    values::{WorkloadProblem, bool_value},
    window::ReloadWindow,
};

/// What a workload's annotations ask of its rollouts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutGates {
    /// `rollout-wave` (0 when absent, never negative): among the workloads a change rolls, lower waves complete
    /// first.
    pub wave: i32,
    /// `halt-on-failed-rollout`: overrides `--halt-on-failed-rollout` for this workload.
    pub halt: Option<bool>,
    /// `reload-window`: reloads wait until it is open.
    pub window: Option<ReloadWindow>,
    /// `reloader.stakater.com/pause` (ours): reloads wait while it is true; its own value over its namespace's.
    pub pause: Option<bool>,
    /// Its namespace has `pause: "true"` (namespace rules; set by the index, never read from the workload).
    pub namespace_paused: bool,
}

type Map = BTreeMap<String, String>;

impl RolloutGates {
    /// Reads the workload's metadata annotations; an invalid value is reported and ignored (the workload keeps
    /// reloading as if it were absent: a typo must not stop reloads).
    pub fn extract(metadata: &Map, problems: &mut Vec<WorkloadProblem>) -> Self {
        let problem = |key: &str, value: &str, message: String| WorkloadProblem {
            key: key.to_owned(),
            value: value.to_owned(),
            message,
        };
        let wave = match metadata.get(annotation::ROLLOUT_WAVE) {
            None => 0,
            // Not negative: a workload without the annotation is wave 0 and must never wait for a wave.
            Some(v) => v.trim().parse::<u32>().ok().and_then(|w| i32::try_from(w).ok()).unwrap_or_else(|| {
                let key = annotation::ROLLOUT_WAVE;
                let message = format!("annotation {key:?}: {v:?} is not a whole number ≥ 0; wave 0");
                problems.push(problem(key, v, message));
                0
            }),
        };
        let halt = metadata.get(annotation::HALT_ON_FAILED_ROLLOUT).and_then(|v| {
            let otherwise = "--halt-on-failed-rollout decides";
            bool_value(annotation::HALT_ON_FAILED_ROLLOUT, v, otherwise, problems)
        });
        let window = metadata.get(annotation::RELOAD_WINDOW).and_then(|v| match ReloadWindow::parse(v) {
            Ok(w) => Some(w),
            Err(e) => {
                let key = annotation::RELOAD_WINDOW;
                problems.push(problem(key, v, format!("annotation {key:?}: {e}; reloads are not deferred")));
                None
            }
        });
        let pause = metadata
            .get(annotation::PAUSE)
            .and_then(|v| bool_value(annotation::PAUSE, v, "reloads are not paused", problems));
        Self { wave, halt, window, pause, namespace_paused: false }
    }

    /// True when none is set (the common case: no work to gather peers).
    pub fn is_default(&self) -> bool {
        self.wave == 0 && self.halt.is_none() && self.window.is_none() && self.pause.is_none() && !self.namespace_paused
    }
}

/// Another workload the same change rolls (or rolled).
#[derive(Clone, Debug, PartialEq)]
pub struct Peer {
    /// Which.
    pub key: WorkloadKey,
    /// Its `rollout-wave`.
    pub wave: i32,
    /// Its rollout, from its status ([`RolloutState::Failed`] also when `--rollout-timeout` passed).
    pub rollout: RolloutState,
    /// It runs the resource's current content (it was rolled, or recorded, with it).
    pub runs_current: bool,
}

/// One resource a workload is about to be reloaded for, and who else that change concerns.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The resource.
    pub resource: ConfigKey,
    /// Its hold id ([`hold_id`]), and whether its `release-hold` annotation carries it.
    pub hold_id: String,
    /// Released.
    pub released: bool,
    /// The other workloads that reload for it.
    pub peers: Vec<Peer>,
}

/// Why a reload waits.
#[derive(Clone, Debug, PartialEq)]
pub enum Wait {
    /// The same change failed to roll out on `failed`: not rolled until the resource changes again or is
    /// annotated `release-hold: <hold_id>`.
    Held {
        /// The resource whose change is held.
        resource: ConfigKey,
        /// The workload whose rollout of it failed.
        failed: WorkloadKey,
        /// What releases it.
        hold_id: String,
    },
    /// A workload of a lower wave has not completed its rollout of the change.
    Wave {
        /// This workload's wave.
        wave: i32,
        /// The resource.
        resource: ConfigKey,
        /// The workload waited for, and its wave.
        behind: (WorkloadKey, i32),
    },
    /// Paused by `reloader.stakater.com/pause: "true"`, on the workload or (`namespace`) its namespace: rolls
    /// once with the newest content when lifted.
    Paused {
        /// The namespace's annotation paused it.
        namespace: bool,
    },
    /// Outside the reload window.
    Window {
        /// The window.
        window: String,
        /// When it opens.
        opens_at: Option<jiff::Timestamp>,
    },
}

impl Wait {
    /// The reason's label in metrics: `held`, `wave`, `window` or `paused`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Paused { .. } => "paused",
            Self::Held { .. } => "held",
            Self::Wave { .. } => "wave",
            Self::Window { .. } => "window",
        }
    }
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Held { resource, failed, hold_id } => write!(
                f,
                "held: the rollout of this change of {resource} failed on {failed}; it rolls when the resource \
                 changes again, or annotate the resource {}={hold_id}",
                annotation::RELEASE_HOLD
            ),
            Self::Wave { wave, resource, behind: (key, behind) } => {
                write!(f, "wave {wave}: waits for {key} (wave {behind}) to complete its rollout of {resource}")
            }
            Self::Paused { namespace } => {
                let on = if *namespace { "its namespace has" } else { "the workload has" };
                write!(
                    f,
                    "paused: {on} {}: \"true\"; it rolls once with the newest content when lifted",
                    annotation::PAUSE
                )
            }
            Self::Window { window, opens_at: Some(at) } => {
                write!(f, "outside its reload window {window:?}; rolls when it opens at {at}")
            }
            Self::Window { window, opens_at: None } => write!(f, "outside its reload window {window:?}"),
        }
    }
}

/// The hold id of a content: the first 12 hex digits of what the `applied-hashes` record holds for it (for a
/// Secret its sealed form, which reveals nothing of the value).
pub fn hold_id(record_hash: &crate::rules::hash::ContentHash) -> String {
    record_hash.to_string().chars().take(12).collect()
}

/// Whether a `release-hold` value releases the content recorded as `record_hash`: its hold id, or a longer
/// prefix of the same digits (at least 7).
pub fn releases(value: &str, record_hash: &crate::rules::hash::ContentHash) -> bool {
    let value = value.trim();
    value.len() >= 7 && record_hash.to_string().starts_with(&value.to_ascii_lowercase())
}

/// Whether a workload with `gates` may be reloaded now for `changes`, or why it waits. `halt_default` is
/// `--halt-on-failed-rollout`. A pause comes first (the operator's stop), then a held change (the safety stop), then
/// waves, then the window.
pub fn gate(gates: &RolloutGates, halt_default: bool, changes: &[Change], now: jiff::Timestamp) -> Option<Wait> {
    if gates.pause.unwrap_or(gates.namespace_paused) {
        return Some(Wait::Paused { namespace: gates.pause.is_none() });
    }
    if gates.halt.unwrap_or(halt_default) {
        for change in changes.iter().filter(|c| !c.released) {
            if let Some(p) = change.peers.iter().find(|p| p.runs_current && p.rollout == RolloutState::Failed) {
                let (resource, failed, hold_id) = (change.resource.clone(), p.key.clone(), change.hold_id.clone());
                return Some(Wait::Held { resource, failed, hold_id });
            }
        }
    }
    for change in changes {
        let pending = |p: &&Peer| !p.runs_current || p.rollout == RolloutState::InProgress;
        let lower = change.peers.iter().filter(|p| p.wave < gates.wave).filter(pending).min_by_key(|p| p.wave);
        if let Some(p) = lower {
            let behind = (p.key.clone(), p.wave);
            return Some(Wait::Wave { wave: gates.wave, resource: change.resource.clone(), behind });
        }
    }
    let window = gates.window.as_ref()?;
    (!window.is_open(now)).then(|| Wait::Window { window: window.to_string(), opens_at: window.next_open(now) })
}

#[cfg(test)]
#[path = "gates_tests.rs"]
mod tests;
