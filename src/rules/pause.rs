//! `deployment.reloader.stakater.com/pause-period` (upstream v1 §3.7): after a reload, pause the Deployment
//! and resume it when the period is over. Pure: given what the Deployment shows and the time, what to write.
//!
//! Unlike upstream, nothing lives in a process-local timer: "paused by us" is read from the object
//! (`spec.paused` plus our `paused-at` annotation), so any replica, after any restart, resumes it on time
//! (upstream #1016, #1219). A Deployment paused by a user (no `paused-at`) is never touched.

use std::time::Duration;

use jiff::Timestamp;

use crate::rules::duration::parse_go_duration;

/// What a workload shows about pausing (a Deployment's pause period; a CronJob's suspension).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PauseState {
    /// The kind's own switch: `spec.paused` (Deployments), `spec.suspend` (CronJobs).
    pub paused: bool,
    /// Our `paused-at` annotation (RFC 3339).
    pub paused_at: Option<String>,
    /// The `pause-period` annotation.
    pub period: Option<String>,
}

/// What to do about pausing in this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseAction {
    /// Nothing.
    None,
    /// Pause now, in the same patch as the reload, recording `at`.
    Pause { at: String },
    /// Resume now (clear `paused-at`, `spec.paused=false`).
    Resume,
    /// Paused by us; check again after this long.
    ResumeIn(Duration),
}

/// Decides the pause action. `reloading` is true when this reconcile writes a reload.
pub fn evaluate(state: &PauseState, reloading: bool, now: Timestamp) -> PauseAction {
    let period = state.period.as_deref().map(parse_go_duration);
    if state.paused {
        let Some(at) = state.paused_at.as_deref() else { return PauseAction::None }; // paused by a user
        // Paused by us: resume when the period is over, or now if the period is gone, invalid or `paused-at`
        // unreadable — never leave it paused forever.
        let (Some(Ok(period)), Ok(at)) = (period, at.parse::<Timestamp>()) else { return PauseAction::Resume };
        // Checked throughout: `paused-at` and the period come from the cluster (year 9999, centuries).
        // A `paused-at` in the future (edited, clock skew) counts as now: the pause never outlasts its period.
        let elapsed = now.duration_since(at).max(jiff::SignedDuration::ZERO);
        let period = jiff::SignedDuration::try_from(period).unwrap_or(jiff::SignedDuration::MAX);
        let remaining = period.checked_sub(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        return match Duration::try_from(remaining) {
            Ok(d) if !d.is_zero() => PauseAction::ResumeIn(d),
            _ => PauseAction::Resume,
        };
    }
    match period {
        // upstream v1 writes RFC 3339 to the second (Go's `time.RFC3339`).
        Some(Ok(p)) if reloading && !p.is_zero() => {
            PauseAction::Pause { at: Timestamp::from_second(now.as_second()).unwrap_or(now).to_string() }
        }
        _ => PauseAction::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn state(paused: bool, at: Option<&str>, period: Option<&str>) -> PauseState {
        PauseState { paused, paused_at: at.map(str::to_owned), period: period.map(str::to_owned) }
    }

    const NOW: &str = "2026-12-02T10:00:00Z";

    #[test]
    fn a_reload_pauses_a_running_deployment_with_a_valid_period() {
        assert_eq!(evaluate(&state(false, None, Some("5m")), true, ts(NOW)), PauseAction::Pause { at: NOW.into() });
        assert_eq!(evaluate(&state(false, None, Some("5m")), false, ts(NOW)), PauseAction::None, "no reload, no pause");
        assert_eq!(
            evaluate(&state(false, None, Some("bogus")), true, ts(NOW)),
            PauseAction::None,
            "invalid: reload without pausing"
        );
        assert_eq!(evaluate(&state(false, None, None), true, ts(NOW)), PauseAction::None);
    }

    #[test]
    fn our_pause_ends_after_the_period_even_after_a_restart() {
        let s = state(true, Some("2026-12-02T09:58:00Z"), Some("5m"));
        assert_eq!(evaluate(&s, false, ts(NOW)), PauseAction::ResumeIn(Duration::from_secs(180)));
        assert_eq!(
            evaluate(&s, true, ts(NOW)),
            PauseAction::ResumeIn(Duration::from_secs(180)),
            "not extended by reloads"
        );
        assert_eq!(evaluate(&s, false, ts("2026-12-02T10:03:00Z")), PauseAction::Resume);
        assert_eq!(evaluate(&s, false, ts("2026-12-02T11:00:00Z")), PauseAction::Resume);
    }

    #[test]
    fn our_pause_ends_now_when_the_period_is_removed_or_invalid() {
        assert_eq!(evaluate(&state(true, Some(NOW), None), false, ts(NOW)), PauseAction::Resume);
        assert_eq!(evaluate(&state(true, Some(NOW), Some("x")), false, ts(NOW)), PauseAction::Resume);
        assert_eq!(evaluate(&state(true, Some("garbage"), Some("5m")), false, ts(NOW)), PauseAction::Resume);
    }

    #[test]
    fn absurd_times_and_periods_never_panic() {
        // A pause of centuries (valid Go), paused-at far in the future or past: a decision, never a panic.
        let centuries = state(true, Some(NOW), Some("2000000h"));
        assert!(
            matches!(evaluate(&centuries, false, ts(NOW)), PauseAction::ResumeIn(d) if d.as_secs() > 7_000_000_000)
        );
        let future = state(true, Some("9000-01-01T00:00:00Z"), Some("5m"));
        assert_eq!(evaluate(&future, false, ts(NOW)), PauseAction::ResumeIn(Duration::from_secs(300)));
        let past = state(true, Some("-009999-01-01T00:00:00Z"), Some("2000000h"));
        assert_eq!(evaluate(&past, false, ts(NOW)), PauseAction::Resume);
        assert_eq!(evaluate(&state(false, None, Some("3000000000000000h")), true, ts(NOW)), PauseAction::None);
    }

    #[test]
    fn paused_at_is_written_to_the_second_like_upstream() {
        let at = "2026-12-02T10:00:00.123456789Z";
        assert_eq!(evaluate(&state(false, None, Some("5m")), true, ts(at)), PauseAction::Pause { at: NOW.into() });
    }

    #[test]
    fn a_user_pause_is_left_alone() {
        assert_eq!(evaluate(&state(true, None, Some("5m")), true, ts(NOW)), PauseAction::None);
    }
}
