//! The `evict-pods` and `delete-pods` rollout strategies (issue 29): for workloads whose pod template an operator
//! owns (a template patch would be reverted or ignored: upstream stakater/Reloader#1057, #972, #1011), the pods
//! are restarted instead — evicted through the Eviction API or deleted (where an eviction would be allowed:
//! PodDisruptionBudgets are asked either way) — one at a time, the next only once the previous one's replacement
//! exists and is Ready. Pure: the controller gives the facts and acts on the answer.
//!
//! What may never happen (issue 38): a pod of another workload restarted (only pods whose controller owner chain
//! leads to the workload count, whatever the selector finds); two of its pods down at once (one missing or not
//! Ready holds the next restart, counted against what the workload should have: `spec.replicas`, else its status,
//! else the count recorded with the boundary at the first step); a restart while the replacement of the last one
//! does not come (its owner's controller down or slow): the restarts stop there and go on by themselves when it
//! comes.
//!
//! Nothing here is remembered in memory. A reload writes, beside its record, the boundary
//! `reloader.stakater.com/restart-pods-created-before` on the workload: the second after the change as the API
//! server stamped the resource's write (its clock also stamps pods' creation), not when a controller saw it, so one
//! that starts after the change counts the pods created since as new. A pod created before the boundary may run
//! the old content and is restarted; its replacement is created after it (restarts begin only once the boundary
//! has passed, so no replacement shares its second). After a restart or failover the next controller reads the
//! boundary and the pods' creation times and goes on where the last one stopped.

use std::time::Duration;

/// A workload's boundary as its `restart-pods-created-before` annotation holds it: `<RFC 3339 time>`, or
/// `<time>;pods=<n>` once the first step recorded how many pods the workload had (a kind that says neither in its
/// spec nor in its status). It is removed only while the object still holds this text: a newer boundary, written
/// for a change that came while the last restarts ended (and not yet in the watch), stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// The time: pods created before it are to restart.
    pub at: jiff::Timestamp,
    /// The pods the workload had at the first step, when recorded.
    pub pods: Option<u32>,
    /// The annotation's value, as written.
    pub text: Box<str>,
}

/// What separates the time from the recorded pod count in the annotation's value.
const PODS_FIELD: &str = ";pods=";

impl Boundary {
    /// The boundary an annotation value holds; `None` when it is not an RFC 3339 time (with a valid count).
    pub fn parse(text: &str) -> Option<Self> {
        let (at, pods) = match text.split_once(PODS_FIELD) {
            Some((at, pods)) => (at, Some(pods.parse().ok()?)),
            None => (text, None),
        };
        Some(Self { at: at.parse().ok()?, pods, text: text.into() })
    }

    /// The boundary at `at` carrying `pods`.
    pub fn new(at: jiff::Timestamp, pods: Option<u32>) -> Self {
        let text = match pods {
            Some(n) => format!("{at}{PODS_FIELD}{n}"),
            None => at.to_string(),
        };
        Self { at, pods, text: text.into() }
    }

    /// The boundary a change at `at` writes over `self` (the one still in force, if any): never earlier than it
    /// — pods it still has to restart stay to restart — and keeping its recorded count, which describes the
    /// workload before any of its pods was restarted (one counted now could miss a pod being replaced).
    pub fn advanced(current: Option<&Self>, at: jiff::Timestamp) -> Self {
        match current {
            Some(c) => Self::new(c.at.max(at), c.pods),
            None => Self::new(at, None),
        }
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
    /// Its controller owner chain leads to the workload. Pods the selector finds that are not (a neighbour whose
    /// labels overlap) are neither restarted nor waited for.
    pub owned: bool,
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

/// The next step, from the pods the workload's selector finds, its boundary, the time, and the pods it should
/// have (`spec.replicas`, its status, or the count recorded at the first step).
pub fn next_step(pods: &[PodFacts], boundary: jiff::Timestamp, now: jiff::Timestamp, want: i64) -> Step {
    if now < boundary {
        let wait = boundary.duration_since(now);
        return Step::NotYet(Duration::try_from(wait).unwrap_or(Duration::from_secs(1)));
    }
    let pods: Vec<&PodFacts> = pods.iter().filter(|p| p.owned).collect();
    let mut old: Vec<&PodFacts> = pods.iter().copied().filter(|p| p.created < boundary && !p.terminating).collect();
    let left = old.len();
    if left == 0 {
        return Step::Done;
    }
    let hold = if let Some(p) = pods.iter().find(|p| p.terminating) {
        Some(Hold::Terminating(p.name.clone()))
    } else if let Some(p) = pods.iter().find(|p| !p.ready) {
        Some(Hold::NotReady(p.name.clone()))
    } else {
        (i64::try_from(pods.len()).unwrap_or(i64::MAX) < want).then_some(Hold::Missing { have: pods.len(), want })
    };
    if let Some(hold) = hold {
        return Step::Wait { hold, left };
    }
    old.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    Step::Restart { pod: old[0].name.clone(), left }
}

/// The count to record at the first step of a workload whose spec and status do not say how many pods it should
/// have: its own pods now, terminating ones included (their replacements are due).
pub fn pods_to_record(pods: &[PodFacts]) -> u32 {
    u32::try_from(pods.iter().filter(|p| p.owned).count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().expect("time")
    }

    fn pod(name: &str, created: &str, ready: bool) -> PodFacts {
        PodFacts { name: name.into(), created: at(created), terminating: false, ready, owned: true }
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
        assert_eq!(next_step(&pods, b, now, 3), Step::Restart { pod: "a".into(), left: 3 });
        assert_eq!(next_step(&pods, b, at("2026-12-05T14:00:00.500Z"), 3), Step::NotYet(Duration::from_millis(500)));
        // "a" evicted: terminating, its replacement not there yet.
        let mut evicted = pods.clone();
        evicted[1].terminating = true;
        let hold = next_step(&evicted, b, now, 3);
        assert_eq!(hold, Step::Wait { hold: Hold::Terminating("a".into()), left: 2 });
        // Gone, the replacement created after the boundary and starting.
        let mut replaced = vec![pods[0].clone(), pods[2].clone(), pod("d", "2026-12-05T14:00:03Z", false)];
        assert_eq!(next_step(&replaced, b, now, 3), Step::Wait { hold: Hold::NotReady("d".into()), left: 2 });
        replaced[2].ready = true;
        assert_eq!(next_step(&replaced, b, now, 3), Step::Restart { pod: "b".into(), left: 2 });
        assert_eq!(
            next_step(&replaced[..2], b, now, 3),
            Step::Wait { hold: Hold::Missing { have: 2, want: 3 }, left: 2 }
        );
        let new = [pod("d", "2026-12-05T14:00:03Z", true), pod("e", "2026-12-05T14:00:01Z", false)];
        assert_eq!(next_step(&new, b, now, 3), Step::Done, "nothing older than the boundary is left");
        assert_eq!(Hold::Missing { have: 2, want: 3 }.to_string(), "2 of 3 pods exist");
    }

    #[test]
    fn pods_of_another_workload_are_neither_restarted_nor_waited_for() {
        let b = at("2026-12-05T14:00:01Z");
        let now = at("2026-12-05T14:00:02Z");
        let mut canary = pod("web-canary-0", "2026-12-05T11:00:00Z", false);
        canary.owned = false;
        let pods = [canary, pod("web-1", "2026-12-05T13:00:00Z", true), pod("web-2", "2026-12-05T13:00:00Z", true)];
        assert_eq!(next_step(&pods, b, now, 2), Step::Restart { pod: "web-1".into(), left: 2 });
        let done =
            [pods[0].clone(), pod("web-3", "2026-12-05T14:00:05Z", true), pod("web-4", "2026-12-05T14:00:09Z", true)];
        assert_eq!(next_step(&done, b, now, 2), Step::Done, "the neighbour's old pod is not this workload's");
        assert_eq!(pods_to_record(&pods), 2);
    }

    /// A DaemonSet (or a kind without `spec.replicas`) whose first pod was deleted and whose controller does not
    /// answer: one pod is missing, the other is not touched.
    #[test]
    fn a_replacement_that_does_not_come_stops_the_restarts() {
        let b = at("2026-12-05T14:00:01Z");
        let now = at("2026-12-05T14:00:02Z");
        let left = [pod("ds-b", "2026-12-05T13:00:00Z", true)];
        assert_eq!(next_step(&left, b, now, 2), Step::Wait { hold: Hold::Missing { have: 1, want: 2 }, left: 1 });
        let back = [left[0].clone(), pod("ds-c", "2026-12-05T14:00:04Z", true)];
        assert_eq!(next_step(&back, b, now, 2), Step::Restart { pod: "ds-b".into(), left: 1 });
    }

    #[test]
    fn the_boundary_carries_the_recorded_count_and_never_moves_back() {
        let b = Boundary::parse("2026-12-05T14:00:01Z").expect("plain");
        assert_eq!((b.at, b.pods), (at("2026-12-05T14:00:01Z"), None));
        let counted = Boundary::parse("2026-12-05T14:00:01Z;pods=3").expect("counted");
        assert_eq!((counted.pods, &*counted.text), (Some(3), "2026-12-05T14:00:01Z;pods=3"));
        assert_eq!(Boundary::new(at("2026-12-05T14:00:01Z"), Some(3)), counted);
        assert_eq!(Boundary::parse("2026-12-05T14:00:01Z;pods=x"), None);
        assert_eq!(Boundary::parse("yesterday"), None);
        let later = Boundary::advanced(Some(&counted), at("2026-12-05T15:00:00Z"));
        assert_eq!(&*later.text, "2026-12-05T15:00:00Z;pods=3", "moved on, the count kept");
        let earlier = Boundary::advanced(Some(&counted), at("2026-12-05T13:00:00Z"));
        assert_eq!(earlier, counted, "a change stamped earlier does not move it back");
        assert_eq!(&*Boundary::advanced(None, at("2026-12-05T13:00:00Z")).text, "2026-12-05T13:00:00Z");
    }
}
