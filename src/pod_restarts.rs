//! The `evict-pods` and `delete-pods` rollout strategies (issue 29): for workloads whose pod template an operator
//! owns (a template patch would be reverted or ignored: upstream stakater/Reloader#1057, #972, #1011), the pods
//! are restarted instead — evicted through the Eviction API (PodDisruptionBudgets respected) or deleted — one at
//! a time, the next only once the previous replacement is Ready. Pure: the controller gives the facts and acts on
//! the answer.
//!
//! Nothing here is remembered in memory. A reload writes, beside its record, the boundary
//! `reloader.stakater.com/restart-pods-created-before` on the workload: the second after the change as the API
//! server stamped the resource's write (its clock also stamps pods' creation), not when a controller saw it, so one
//! that starts after the change counts the pods created since as new. A pod created before the boundary may run
//! the old content and is restarted; its replacement is created after it (restarts begin only once the boundary
//! has passed, so no replacement shares its second). After a restart or failover the next controller reads the
//! boundary and the pods' creation times and goes on where the last one stopped.

use std::time::Duration;

/// A workload's boundary as its `restart-pods-created-before` annotation holds it. It is removed only while the
/// object still holds this text: a newer boundary, written for a change that came while the last restarts ended
/// (and not yet in the watch), stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// The time: pods created before it are to restart.
    pub at: jiff::Timestamp,
    /// The annotation's value, as written.
    pub text: Box<str>,
}

impl Boundary {
    /// The boundary an annotation value holds; `None` when it is not an RFC 3339 time.
    pub fn parse(text: &str) -> Option<Self> {
        Some(Self { at: text.parse().ok()?, text: text.into() })
    }
}

/// What the controller knows of one pod of the workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// Its name.
    pub name: String,
    /// `metadata.creationTimestamp`.
    pub created: jiff::Timestamp,
    /// It has a `deletionTimestamp`.
    pub terminating: bool,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
}

/// Why the next restart waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// A pod is still terminating.
    Terminating(String),
    /// A pod is not Ready (a replacement starting, or one unhealthy anyway).
    NotReady(String),
    /// Fewer pods than the workload wants: a replacement is not created yet.
    Missing {
        /// Pods there are.
        have: usize,
        /// Pods it wants.
        want: i64,
    },
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Terminating(pod) => write!(f, "pod {pod} is terminating"),
            Self::NotReady(pod) => write!(f, "pod {pod} is not Ready"),
            Self::Missing { have, want } => write!(f, "{have} of {want} pods exist"),
        }
    }
}

/// The next step of a workload's pod restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The boundary has not passed yet: look again after this long.
    NotYet(Duration),
    /// Every pod was created after the boundary.
    Done,
    /// The next restart waits; `left` pods are still to restart.
    Wait {
        /// Why.
        hold: Hold,
        /// Pods created before the boundary, not terminating.
        left: usize,
    },
    /// Restart this pod (the oldest of the `left` still to restart).
    Restart {
        /// Its name.
        pod: String,
        /// Pods still to restart, this one included.
        left: usize,
    },
}

/// The boundary for a change at `changed_at`: the start of the next second. Pods' creation times have whole
/// seconds, so a pod of the change's second counts as older (restarted once more rather than missed).
pub fn boundary(changed_at: jiff::Timestamp) -> jiff::Timestamp {
    let next = changed_at.as_second().saturating_add(1);
    jiff::Timestamp::from_second(next).unwrap_or(changed_at)
}

/// The next step, from the pods the workload's selector finds, its boundary, the time, and the replicas it wants
/// (`spec.replicas`, when it has one).
pub fn next_step(pods: &[PodFacts], boundary: jiff::Timestamp, now: jiff::Timestamp, want: Option<i64>) -> Step {
    if now < boundary {
        let wait = boundary.duration_since(now);
        return Step::NotYet(Duration::try_from(wait).unwrap_or(Duration::from_secs(1)));
    }
    let mut old: Vec<&PodFacts> = pods.iter().filter(|p| p.created < boundary && !p.terminating).collect();
    let left = old.len();
    if left == 0 {
        return Step::Done;
    }
    let hold = if let Some(p) = pods.iter().find(|p| p.terminating) {
        Some(Hold::Terminating(p.name.clone()))
    } else if let Some(p) = pods.iter().find(|p| !p.ready) {
        Some(Hold::NotReady(p.name.clone()))
    } else {
        want.filter(|w| i64::try_from(pods.len()).unwrap_or(i64::MAX) < *w)
            .map(|want| Hold::Missing { have: pods.len(), want })
    };
    if let Some(hold) = hold {
        return Step::Wait { hold, left };
    }
    old.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    Step::Restart { pod: old[0].name.clone(), left }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().expect("time")
    }

    fn pod(name: &str, created: &str, ready: bool) -> PodFacts {
        PodFacts { name: name.into(), created: at(created), terminating: false, ready }
    }

    #[test]
    fn the_boundary_is_the_next_whole_second() {
        assert_eq!(boundary(at("2026-12-05T14:00:00.400Z")), at("2026-12-05T14:00:01Z"));
        assert_eq!(boundary(at("2026-12-05T14:00:00Z")), at("2026-12-05T14:00:01Z"));
    }

    #[test]
    fn pods_older_than_the_boundary_restart_one_at_a_time_oldest_first() {
        let b = at("2026-12-05T14:00:01Z");
        let now = at("2026-12-05T14:00:02Z");
        let pods = [
            pod("b", "2026-12-05T13:00:00Z", true),
            pod("a", "2026-12-05T12:00:00Z", true),
            pod("c", "2026-12-05T14:00:00Z", true),
        ];
        assert_eq!(next_step(&pods, b, now, Some(3)), Step::Restart { pod: "a".into(), left: 3 });
        assert_eq!(
            next_step(&pods, b, at("2026-12-05T14:00:00.500Z"), Some(3)),
            Step::NotYet(Duration::from_millis(500))
        );
        // "a" evicted: terminating, its replacement not there yet.
        let mut evicted = pods.clone();
        evicted[1].terminating = true;
        let hold = next_step(&evicted, b, now, Some(3));
        assert_eq!(hold, Step::Wait { hold: Hold::Terminating("a".into()), left: 2 });
        // Gone, the replacement created after the boundary and starting.
        let mut replaced = vec![pods[0].clone(), pods[2].clone(), pod("d", "2026-12-05T14:00:03Z", false)];
        assert_eq!(next_step(&replaced, b, now, Some(3)), Step::Wait { hold: Hold::NotReady("d".into()), left: 2 });
        replaced[2].ready = true;
        assert_eq!(next_step(&replaced, b, now, Some(3)), Step::Restart { pod: "b".into(), left: 2 });
        assert_eq!(
            next_step(&replaced[..2], b, now, Some(3)),
            Step::Wait { hold: Hold::Missing { have: 2, want: 3 }, left: 2 }
        );
        let new = [pod("d", "2026-12-05T14:00:03Z", true), pod("e", "2026-12-05T14:00:01Z", false)];
        assert_eq!(next_step(&new, b, now, Some(3)), Step::Done, "nothing older than the boundary is left");
        assert_eq!(Hold::Missing { have: 2, want: 3 }.to_string(), "2 of 3 pods exist");
    }
}
