//! Writes Events to the API server: events.k8s.io/v1, or core v1 where only that is allowed. A repeat of an Event
//! published in the last [`SERIES_TTL`] (same object, type, reason, action and note) increments the first one's
//! count instead of creating another, as client-go's recorders do.
//!
//! kube-runtime's `Recorder` was used before: it keeps every Event it published (the whole object) for six
//! minutes and scans them all on each publish — 8 MB and 9% of the controller's CPU after 1,000 reloads in bench
//! M1 (heaptrack and perf, bench/results/HISTORY.md) — and it keyed repeats without the note, so a second reload of a
//! workload within six minutes re-counted the first reload's note. Here only a hash, a name and a count are kept,
//! for at most [`RECENT_MAX`] Events.

use std::{
    collections::{HashMap, VecDeque},
    hash::{DefaultHasher, Hash, Hasher},
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{
        core::v1::{Event as CoreEvent, EventSource, ObjectReference},
        events::v1::Event as EventV1,
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
};
use kube::{
    Api, Client, Resource,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::REPORTER;

/// A repeat within this time counts on the first Event (client-go and kube-runtime use 6 minutes).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// Most Events remembered for counting repeats; the oldest is forgotten first.
pub const RECENT_MAX: usize = 512;

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something a user should look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// One Event to publish about `regarding`.
#[derive(Clone, Debug)]
pub struct EventNote {
    /// The object the Event is about.
    pub regarding: ObjectReference,
    /// Severity.
    pub type_: EventType,
    /// `Reloaded`, `ReloadFail`, …
    pub reason: &'static str,
    /// `Reload`, `Hold`, `Validate`.
    pub action: &'static str,
    /// The message (at most 1 kB).
    pub note: String,
}

impl EventNote {
    /// What makes two Events the same: everything but the time.
    fn identity(&self) -> u64 {
        let mut h = DefaultHasher::new();
        let r = &self.regarding;
        (&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid).hash(&mut h);
        (self.type_, self.reason, self.action, &self.note).hash(&mut h);
        h.finish()
    }
}

/// Which Events API a published Event lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventsApi {
    /// events.k8s.io/v1.
    V1,
    /// core v1 (upstream v1's RBAC grants only this).
    Core,
}

/// A published Event that a repeat would count on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// Its name (in the regarding object's namespace).
    pub name: String,
    /// Where it was created.
    pub api: EventsApi,
    /// How many times it happened.
    pub count: i32,
}

/// The recently published Events, bounded in time and number.
#[derive(Debug, Default)]
pub struct Recent {
    by_identity: HashMap<u64, (Published, Instant)>,
    /// Identities in the order they were first published.
    order: VecDeque<u64>,
}

impl Recent {
    /// The Event a repeat of `identity` counts on at `now`, if it is recent.
    pub fn repeat_of(&mut self, identity: u64, now: Instant) -> Option<&mut Published> {
        self.expire(now);
        self.by_identity.get_mut(&identity).map(|(p, _)| p)
    }

    /// Remembers a newly created Event (replacing one of the same identity: the order stays that of creation,
    /// so expiry stops at the first recent one).
    pub fn created(&mut self, identity: u64, published: Published, now: Instant) {
        self.forget(identity);
        self.expire(now);
        while self.order.len() >= RECENT_MAX {
            if let Some(oldest) = self.order.pop_front() {
                self.by_identity.remove(&oldest);
            }
        }
        self.by_identity.insert(identity, (published, now));
        self.order.push_back(identity);
    }

    /// Forgets `identity` (its Event is gone from the API server).
    pub fn forget(&mut self, identity: u64) {
        if self.by_identity.remove(&identity).is_some() {
            self.order.retain(|i| *i != identity);
        }
    }

    #[cfg(test)]
    /// How many Events are remembered.
    pub fn len(&self) -> usize {
        self.by_identity.len()
    }

    #[cfg(test)]
    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.by_identity.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            match self.by_identity.get(oldest) {
                Some((_, first)) if now.duration_since(*first) < SERIES_TTL => break,
                _ => {
                    if let Some(gone) = self.order.pop_front() {
                        self.by_identity.remove(&gone);
                    }
                }
            }
        }
    }
}

/// Publishes Events; remembers recent ones to count repeats.
pub struct Publisher {
    client: Client,
    recent: Recent,
}

impl Publisher {
    /// A publisher writing with `client`.
    pub fn new(client: Client) -> Self {
        Self { client, recent: Recent::default() }
    }

    /// Publishes `event` through `api`: a repeat of a recent Event increments its count, anything else creates
    /// one.
    pub async fn publish(&mut self, event: &EventNote, api: EventsApi) -> Result<(), kube::Error> {
        let identity = event.identity();
        let namespace = event.regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
        if let Some(p) = self.recent.repeat_of(identity, Instant::now()).filter(|p| p.api == api) {
            let count = p.count + 1;
            match count_repeat(&self.client, &namespace, p, count).await {
                Ok(()) => {
                    p.count = count;
                    return Ok(());
                }
                // Expired on the server (Events live an hour by default) or deleted, or the credentials may create
                // Events but not patch them: create it afresh (a 403 here must not read as "this API is forbidden").
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => self.recent.forget(identity),
                Err(e) => return Err(e),
            }
        }
        let name = event_name(event);
        create(&self.client, &namespace, &name, event, api).await?;
        self.recent.created(identity, Published { name, api, count: 1 }, Instant::now());
        Ok(())
    }
}

/// Names are unique per object and instant, as client-go names them (`<object>.<hex nanoseconds>`).
fn event_name(event: &EventNote) -> String {
    let nanos = jiff::Timestamp::now().as_nanosecond();
    format!("{}.{nanos:x}", event.regarding.name.as_deref().unwrap_or(REPORTER))
}

/// Increments a published Event's count (`series` on events.k8s.io, `count` on core Events).
async fn count_repeat(client: &Client, namespace: &str, p: &Published, count: i32) -> Result<(), kube::Error> {
    let now = jiff::Timestamp::now();
    let params = PatchParams::default();
    match p.api {
        EventsApi::V1 => {
            let body = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            Api::<EventV1>::namespaced(client.clone(), namespace)
                .patch(&p.name, &params, &Patch::Merge(body))
                .await
                .map(|_| ())
        }
        EventsApi::Core => {
            let body = json!({"count": count, "lastTimestamp": Time(now)});
            Api::<CoreEvent>::namespaced(client.clone(), namespace)
                .patch(&p.name, &params, &Patch::Merge(body))
                .await
                .map(|_| ())
        }
    }
}

async fn create(
    client: &Client,
    namespace: &str,
    name: &str,
    event: &EventNote,
    api: EventsApi,
) -> Result<(), kube::Error> {
    let metadata =
        ObjectMeta { name: Some(name.to_owned()), namespace: Some(namespace.to_owned()), ..ObjectMeta::default() };
    let (url, body) = match api {
        EventsApi::V1 => {
            let body = EventV1 {
                metadata,
                action: Some(event.action.to_owned()),
                reason: Some(event.reason.to_owned()),
                note: Some(event.note.clone()),
                type_: Some(event.type_.as_str().to_owned()),
                event_time: Some(MicroTime(jiff::Timestamp::now())),
                regarding: Some(event.regarding.clone()),
                reporting_controller: Some(REPORTER.to_owned()),
                reporting_instance: Some(REPORTER.to_owned()),
                ..EventV1::default()
            };
            (EventV1::url_path(&(), Some(namespace)), serde_json::to_vec(&body))
        }
        EventsApi::Core => {
            let now = Time(jiff::Timestamp::now());
            let body = CoreEvent {
                metadata,
                involved_object: event.regarding.clone(),
                reason: Some(event.reason.to_owned()),
                message: Some(event.note.clone()),
                type_: Some(event.type_.as_str().to_owned()),
                action: Some(event.action.to_owned()),
                source: Some(EventSource { component: Some(REPORTER.to_owned()), host: None }),
                first_timestamp: Some(now.clone()),
                last_timestamp: Some(now),
                count: Some(1),
                ..CoreEvent::default()
            };
            (CoreEvent::url_path(&(), Some(namespace)), serde_json::to_vec(&body))
        }
    };
    let body = body.map_err(kube::Error::SerdeError)?;
    // The response (the Event as stored) is dropped, not decoded: nothing here needs it.
    let request =
        kube::core::Request::new(url).create(&PostParams::default(), body).map_err(kube::Error::BuildRequest)?;
    crate::client::send_ignoring_response(client, request).await
}

#[cfg(test)]
#[path = "publisher_tests.rs"]
mod tests;
