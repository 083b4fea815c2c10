use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;

use super::{EventNote, EventType, EventsApi, Published, Publisher, RECENT_MAX, Recent, SERIES_TTL};

fn note(name: &str, text: &str) -> EventNote {
    EventNote {
        regarding: ObjectReference {
            kind: Some("Deployment".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            ..ObjectReference::default()
        },
        type_: EventType::Normal,
        reason: "Reloaded",
        action: "Reload",
        note: text.into(),
    }
}

fn published(name: &str) -> Published {
    Published { name: name.into(), api: EventsApi::V1, count: 1 }
}

#[test]
fn the_same_event_is_a_repeat_and_a_different_note_is_not() {
    // kube-runtime's Recorder keyed repeats without the note: a second reload's Event re-counted the first one.
    let a = note("web", "Changes detected in 'a'");
    assert_eq!(a.identity(), note("web", "Changes detected in 'a'").identity());
    assert_ne!(a.identity(), note("web", "Changes detected in 'b'").identity());
    assert_ne!(a.identity(), note("api", "Changes detected in 'a'").identity());
    let mut warning = a.clone();
    warning.type_ = EventType::Warning;
    assert_ne!(a.identity(), warning.identity());
}

#[test]
fn a_repeat_counts_on_the_first_event_until_it_is_older_than_the_ttl() {
    let mut recent = Recent::default();
    let t0 = Instant::now();
    recent.created(7, published("web.1"), t0);
    let p = recent.repeat_of(7, t0 + Duration::from_secs(10)).expect("recent");
    p.count += 1;
    assert_eq!(
        recent.repeat_of(7, t0 + Duration::from_secs(20)),
        Some(&mut Published { count: 2, ..published("web.1") })
    );
    assert_eq!(recent.repeat_of(8, t0), None);
    assert_eq!(recent.repeat_of(7, t0 + SERIES_TTL), None, "expired");
    assert!(recent.is_empty());
}

#[test]
fn memory_is_bounded_oldest_first() {
    let mut recent = Recent::default();
    let t0 = Instant::now();
    for i in 0..(RECENT_MAX as u64 + 10) {
        recent.created(i, published(&format!("e.{i}")), t0);
    }
    assert_eq!(recent.len(), RECENT_MAX);
    assert_eq!(recent.repeat_of(0, t0), None, "the oldest is forgotten");
    assert_eq!(recent.repeat_of(9, t0), None);
    assert!(recent.repeat_of(10, t0).is_some());
    assert!(recent.repeat_of(RECENT_MAX as u64 + 9, t0).is_some());
}

#[test]
fn a_forgotten_event_is_created_again() {
    let mut recent = Recent::default();
    let t0 = Instant::now();
    recent.created(1, published("a"), t0);
    recent.created(2, published("b"), t0);
    recent.forget(1);
    assert_eq!(recent.repeat_of(1, t0), None);
    assert!(recent.repeat_of(2, t0).is_some());
    recent.created(1, published("a2"), t0);
    assert_eq!(recent.len(), 2);
}

#[test]
fn an_event_created_again_expires_from_its_new_creation() {
    // After a switch to core Events the same identity is created again: it must not keep its old place in line,
    // where expiring it would stop at a newer time and leave older entries behind it.
    let mut recent = Recent::default();
    let t0 = Instant::now();
    recent.created(1, published("a"), t0);
    recent.created(2, published("b"), t0 + Duration::from_secs(60));
    recent.created(1, Published { api: EventsApi::Core, ..published("a2") }, t0 + Duration::from_secs(120));
    let later = t0 + SERIES_TTL + Duration::from_secs(61);
    assert_eq!(recent.repeat_of(2, later), None, "b expired");
    assert_eq!(recent.repeat_of(1, later).map(|p| p.name.clone()), Some("a2".to_owned()));
    assert_eq!(recent.len(), 1);
}

#[tokio::test]
async fn a_repeat_that_may_not_be_patched_is_created_as_a_new_event() {
    use kube::client::Body;
    let (service, mut handle) = tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
    let mut publisher = Publisher::new(kube::Client::new(service, "default"));
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        for status in [201, 403, 201] {
            let (request, respond) = handle.next_request().await.expect("a request");
            seen.push(format!("{} {}", request.method(), request.uri().path()));
            let body = if status == 403 {
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}"#
            } else {
                "{}"
            };
            let response = http::Response::builder().status(status).body(Body::from(body.as_bytes().to_vec()));
            respond.send_response(response.expect("response"));
        }
        seen
    });
    publisher.publish(&note("web", "x"), EventsApi::V1).await.expect("created");
    publisher.publish(&note("web", "x"), EventsApi::V1).await.expect("created again, not failed");
    let seen = server.await.expect("server");
    let path = "/apis/events.k8s.io/v1/namespaces/ns/events";
    assert_eq!(seen[0], format!("POST {path}"));
    assert!(seen[1].starts_with(&format!("PATCH {path}/web.")), "the repeat counts on the first: {seen:?}");
    assert_eq!(seen[2], format!("POST {path}"), "refused: created as a new Event");
}
