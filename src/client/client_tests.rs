//! The client's layers over a mock API server: a throttled request is sent again, the same, and each attempt is
//! counted; lasting throttling reaches the caller after the brief retries instead of holding it; a 503, which may
//! follow an applied request, is never sent again.

use http::{Request, Response, StatusCode};
use kube::client::{Body, ClientBuilder};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use tower_test::mock::Handle;

use super::{CountRequests, layered, retry::RETRIES};

fn counting() -> CountRequests {
    let counter = IntCounterVec::new(Opts::new("requests", "requests"), &["code", "method", "host"]).expect("counter");
    let duration = HistogramVec::new(HistogramOpts::new("duration", "duration"), &["verb", "host"]).expect("histogram");
    CountRequests { counter, duration, host: "api".into() }
}

fn answer(status: StatusCode, retry_after: Option<&str>) -> Response<Body> {
    let status_body = format!(r#"{{"kind":"Status","apiVersion":"v1","code":{}}}"#, status.as_u16());
    let mut response = Response::new(Body::from(status_body.into_bytes()));
    *response.status_mut() = status;
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(http::header::RETRY_AFTER, seconds.parse().expect("header"));
    }
    response
}

/// A client with our layers over a mock API server, and its request counter.
fn client_over_mock() -> (kube::Client, Handle<Request<Body>, Response<Body>>, CountRequests) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let count = counting();
    (layered(ClientBuilder::new(service, "default"), &count), handle, count)
}

fn patch() -> Request<Vec<u8>> {
    Request::patch("/apis/apps/v1/namespaces/ns/deployments/web")
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(br#"{"spec":{}}"#.to_vec())
        .expect("request")
}

#[tokio::test(start_paused = true)]
async fn a_throttled_request_is_sent_again_the_same_and_each_attempt_is_counted() {
    let (client, mut handle, count) = client_over_mock();
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        for status in [StatusCode::TOO_MANY_REQUESTS, StatusCode::OK] {
            let (request, respond) = handle.next_request().await.expect("a request");
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.expect("body").to_vec();
            seen.push((parts.method.to_string(), parts.uri.to_string(), body));
            respond.send_response(answer(status, Some("1")));
        }
        seen
    });
    let started = tokio::time::Instant::now();
    client.request_text(patch()).await.expect("the second attempt succeeds");
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "waited for Retry-After");
    let seen = server.await.expect("server");
    let first =
        ("PATCH".to_owned(), "/apis/apps/v1/namespaces/ns/deployments/web".to_owned(), br#"{"spec":{}}"#.to_vec());
    assert_eq!(seen, [first.clone(), first]);
    let counted = |code: &str| count.counter.with_label_values(&[code, "PATCH", "api"]).get();
    assert_eq!((counted("429"), counted("200")), (1, 1));
}

/// Sends one PATCH that the mock server answers `status` every time; returns the caller's result, how long it
/// waited and how many attempts the server saw.
async fn always_answered(status: StatusCode) -> (Result<String, kube::Error>, std::time::Duration, u32, u64) {
    let (client, mut handle, count) = client_over_mock();
    let server = tokio::spawn(async move {
        let mut attempts = 0;
        while let Some((_, respond)) = handle.next_request().await {
            attempts += 1;
            respond.send_response(answer(status, None));
        }
        attempts
    });
    let started = tokio::time::Instant::now();
    let result = client.request_text(patch()).await;
    let waited = started.elapsed();
    drop(client);
    let attempts = server.await.expect("server");
    let counted = count.counter.with_label_values(&[status.as_str(), "PATCH", "api"]).get();
    (result, waited, attempts, counted)
}

#[tokio::test(start_paused = true)]
async fn lasting_throttling_reaches_the_caller_after_the_brief_retries() {
    let (result, waited, attempts, counted) = always_answered(StatusCode::TOO_MANY_REQUESTS).await;
    assert!(matches!(&result, Err(kube::Error::Api(s)) if s.code == 429), "{result:?}");
    // 50 + 100 + 200 ms of backoff, not kube's default minutes.
    assert_eq!(waited, std::time::Duration::from_millis(350));
    assert_eq!((attempts, counted), (1 + RETRIES, u64::from(1 + RETRIES)));
}

/// Issue 27, finding 5: a 503 may come after the write was applied; the caller gets it at once.
#[tokio::test(start_paused = true)]
async fn a_503_is_sent_once_and_reaches_the_caller() {
    let (result, waited, attempts, counted) = always_answered(StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(matches!(&result, Err(kube::Error::Api(s)) if s.code == 503), "{result:?}");
    assert_eq!((waited, attempts, counted), (std::time::Duration::ZERO, 1, 1));
}

/// Issue 38: a server error or a lost connection may follow an applied write (it is read back); a 4xx is the API
/// server's verdict, and a request that could not be built was never sent.
#[test]
fn server_errors_and_lost_connections_leave_a_write_unknown_verdicts_do_not() {
    let api = |code: u16| kube::Error::Api(kube::core::Status { code, ..Default::default() }.boxed());
    for code in [500, 503, 504] {
        assert!(super::outcome_unknown(&api(code)), "{code}");
    }
    for code in [400, 403, 404, 409, 422, 429] {
        assert!(!super::outcome_unknown(&api(code)), "{code}");
    }
    let lost = kube::Error::Service("connection reset by peer".into());
    assert!(super::outcome_unknown(&lost));
    let unbuilt = kube::Error::HttpError(http::Request::get("\u{7f}").body(()).expect_err("an invalid uri"));
    assert!(!super::outcome_unknown(&unbuilt));
}

/// Issue 38: waits on the API server's times follow its clock, learned from its answers' `Date` header.
#[test]
fn the_api_servers_clock_is_learned_from_the_date_header() {
    let local = jiff::Timestamp::from_second(1_800_000_000).expect("a time");
    let ahead = http::HeaderValue::from_static("Fri, 15 Jan 2027 09:00:00 GMT"); // local + 1 hour
    super::server_clock::observe(&ahead, local);
    let skew = super::server_clock::now().duration_since(jiff::Timestamp::now());
    assert!((skew.as_secs() - 3600).abs() <= 1, "{skew:?}");
    super::server_clock::observe(&http::HeaderValue::from_static("not a date"), local);
    let kept = super::server_clock::now().duration_since(jiff::Timestamp::now());
    assert!((kept.as_secs() - 3600).abs() <= 1, "an unreadable header changes nothing: {kept:?}");
    let same = http::HeaderValue::from_static("Fri, 15 Jan 2027 08:00:00 GMT"); // local
    super::server_clock::observe(&same, local);
    assert!(super::server_clock::now().duration_since(jiff::Timestamp::now()).as_secs().abs() <= 1);
}

fn uri_of(uri: &str) -> String {
    super::consistent_initial_events(Request::get(uri).body(()).expect("request")).uri().to_string()
}

#[test]
fn a_streamed_list_at_any_version_becomes_a_consistent_one_and_nothing_else_changes() {
    let streamed = "/api/v1/configmaps?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0";
    assert_eq!(
        uri_of(streamed),
        "/api/v1/configmaps?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    );
    // A resumed watch, a watch from a bookmark, a list: as they are.
    for unchanged in [
        "/api/v1/configmaps?&watch=true&allowWatchBookmarks=true&resourceVersion=0",
        "/api/v1/configmaps?&watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=1234",
        "/api/v1/configmaps?limit=100&resourceVersion=0",
        "/api/v1/namespaces/ns/configmaps/cfg",
    ] {
        assert_eq!(uri_of(unchanged), unchanged);
    }
}

/// The watcher's own streamed-list request, through the client's layers: what reaches the API server has no
/// `resourceVersion=0` (a check that kube still words the request as `consistent_initial_events` expects).
#[tokio::test]
async fn the_watchers_streamed_list_reaches_the_api_server_without_a_resource_version() {
    use futures::StreamExt;
    let (client, mut handle, _) = client_over_mock();
    let server = tokio::spawn(async move {
        let (request, respond) = handle.next_request().await.expect("a request");
        respond.send_response(answer(StatusCode::FORBIDDEN, None));
        request.uri().to_string()
    });
    let api = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::all(client);
    let config = kube::runtime::watcher::Config::default().streaming_lists();
    let mut stream = kube::runtime::watcher(api, config).boxed();
    let _ = stream.next().await;
    let uri = server.await.expect("server");
    assert!(uri.contains("sendInitialEvents=true") && uri.contains("resourceVersionMatch=NotOlderThan"), "{uri}");
    assert!(!uri.contains("resourceVersion=0") && !uri.contains("resourceVersion=&"), "{uri}");
}
