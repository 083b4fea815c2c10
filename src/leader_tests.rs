//! Exact request/response exchanges of one election attempt (tower-test).

use kube::client::Body;
use serde_json::json;

use super::*;

fn elector(client: Client) -> Elector {
    let cfg = LeaderElection {
        lease_name: "lock".into(),
        namespace: "ns".into(),
        identity: "me".into(),
        lease_seconds: 15,
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
        release_on_cancel: true,
    };
    Elector { api: Api::namespaced(client, "ns"), cfg, observed: None }
}

/// The renew time every Lease of these tests carries.
const RENEWED: &str = "2026-12-03T10:00:00.000000Z";

fn lease(holder: &str) -> Vec<u8> {
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lock", "namespace": "ns", "resourceVersion": "7"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": RENEWED}});
    serde_json::to_vec(&lease).expect("lease")
}

fn conflict() -> Vec<u8> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
        "message": "Operation cannot be fulfilled on leases.coordination.k8s.io \"lock\": the object has been modified"});
    serde_json::to_vec(&status).expect("status")
}

/// GET answers `read`, the PUT answers 409; returns the attempt's outcome and the requests' methods.
async fn renewal_meeting_a_conflict(read: &str) -> (Result<Attempt, kube::Error>, Vec<String>) {
    let (service, mut handle) = tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
    let mut elector = elector(Client::new(service, "ns"));
    let read = lease(read);
    let server = tokio::spawn(async move {
        let mut methods = Vec::new();
        for (status, body) in [(200, read), (409, conflict())] {
            let (request, respond) = handle.next_request().await.expect("a request");
            methods.push(request.method().to_string());
            let response = http::Response::builder().status(status).body(Body::from(body));
            respond.send_response(response.expect("response"));
        }
        methods
    });
    let attempt = elector.try_acquire_or_renew().await;
    (attempt, server.await.expect("server"))
}

#[tokio::test]
async fn a_conflicting_renewal_of_our_own_lease_is_a_failed_attempt_not_another_leader() {
    let (attempt, methods) = renewal_meeting_a_conflict("me").await;
    assert_eq!(methods, ["GET", "PUT"]);
    assert!(matches!(attempt, Err(kube::Error::Api(ref s)) if s.code == 409), "{attempt:?}");
}

#[tokio::test]
async fn a_conflicting_takeover_of_an_expired_lease_means_someone_else_won() {
    // The same record (holder, renew time) was seen a minute ago: its holder has not renewed for its lease
    // duration by our clock, so we try to take it, and someone else writes first.
    let (service, mut handle) = tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
    let mut elector = elector(Client::new(service, "ns"));
    elector.observed = Some(Observed {
        holder: "other".into(),
        renew_time: Some(MicroTime(RENEWED.parse().expect("time"))),
        lease_seconds: 15,
        at: Instant::now().checked_sub(Duration::from_secs(60)).expect("a minute ago"),
    });
    let server = tokio::spawn(async move {
        for (status, body) in [(200, lease("other")), (409, conflict())] {
            let (_, respond) = handle.next_request().await.expect("a request");
            respond.send_response(http::Response::builder().status(status).body(Body::from(body)).expect("response"));
        }
    });
    let attempt = elector.try_acquire_or_renew().await;
    server.await.expect("server");
    assert_eq!(attempt.ok(), Some(Attempt::Other("other".into())));
}

#[tokio::test]
async fn an_election_that_cannot_start_closes_the_leadership_channel() {
    let cfg = elector(Client::new(tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>().0, "ns")).cfg;
    let failing = async { Err(kube::Error::LinesCodecMaxLineLengthExceeded) };
    let mut leadership = Leadership::elect(failing, &cfg);
    // The controller reads a closed channel as "leader election stopped" and exits with an error.
    let changed = tokio::time::timeout(Duration::from_secs(5), leadership.is_leader.changed()).await;
    assert!(matches!(changed, Ok(Err(_))), "the channel must close: {changed:?}");
    assert!(!*leadership.is_leader.borrow());
}
