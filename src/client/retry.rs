//! Brief client-side retries of throttled responses (429) only: the one answer that says the request was not
//! executed (API Priority and Fairness rejects before the handler runs; so does an eviction a PDB refuses).
//!
//! A 503 or 504 may come after the request was applied (a webhook or etcd slow to answer, the API server's
//! timeout): sent again, a Job's DELETE met 404 and was read as "the workload is gone", an Event's POST made a
//! duplicate (issue 27, finding 5). Those go back to the caller, whose owner of retries (the work queue)
//! re-derives what is still to do from the cluster before writing again. kube's default policy also retried
//! them up to 15 times over ≈ 3 minutes, holding a worker all along. Here a 429 is tried again at most
//! [`RETRIES`] times, for at most [`MAX_WAIT`] each; after that the error goes back to the caller too.
//!
//! Like client-go (upstream's client), a `Retry-After` header sets the wait; upstream retries up to 10 times and
//! waits as long as the header says. kube's `RetryPolicy::new` takes a count and a backoff too, but it also waits
//! as long as any `Retry-After` says, so a server asking for minutes would hold the worker again: hence this
//! policy, which hands such an answer to the caller.

use std::time::Duration;

use http::{HeaderMap, Request, Response, StatusCode};
use kube::client::Body;
use tower::{BoxError, retry::Policy};

/// Attempts after the first.
pub const RETRIES: u32 = 3;
/// The wait before the first retry without a `Retry-After` header; it doubles for each next one.
pub const FIRST_WAIT: Duration = Duration::from_millis(50);
/// The longest wait a request makes: a server asking for more gets its answer passed on to the caller.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// The retry policy: [`RETRIES`] more attempts for 429 answers.
#[derive(Clone, Debug)]
pub struct BriefRetry {
    left: u32,
    backoff: Duration,
}

impl Default for BriefRetry {
    fn default() -> Self {
        Self { left: RETRIES, backoff: FIRST_WAIT }
    }
}

impl BriefRetry {
    /// How long to wait before trying again after an answer, or `None` to hand the answer to the caller.
    pub fn next_wait(&mut self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        if status != StatusCode::TOO_MANY_REQUESTS || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let backoff = self.backoff;
        self.backoff = self.backoff.saturating_mul(2);
        let wait = retry_after(headers).unwrap_or(backoff);
        (wait <= MAX_WAIT).then_some(wait)
    }
}

/// `Retry-After` in seconds (the API server's form; an HTTP date is treated as absent).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.trim().parse::<u64>().ok()?;
    Some(Duration::from_secs(seconds))
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for BriefRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        self.next_wait(response.status(), response.headers()).map(tokio::time::sleep)
    }

    /// A request whose body can be sent again (every request but a streamed one) is kept for a retry.
    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        let mut copy = Request::new(request.body().try_clone()?);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(retry_after: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = retry_after {
            h.insert(http::header::RETRY_AFTER, v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn throttled_is_retried_three_times_with_doubling_waits() {
        let mut policy = BriefRetry::default();
        let waits: Vec<_> = (0..4).map(|_| policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(None))).collect();
        let ms = Duration::from_millis;
        assert_eq!(waits, [Some(ms(50)), Some(ms(100)), Some(ms(200)), None]);
    }

    #[test]
    fn retry_after_sets_the_wait_up_to_the_cap() {
        let mut policy = BriefRetry::default();
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(Some("1"))), Some(Duration::from_secs(1)));
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(Some("2"))), Some(Duration::from_secs(2)));
        // Longer than a request may hold its caller: the caller gets the answer (its queue waits instead).
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(Some("30"))), None);
        // Not a number of seconds: the backoff applies.
        let mut policy = BriefRetry::default();
        let date = Some("Fri, 04 Dec 2026 14:00:00 GMT");
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(date)), Some(FIRST_WAIT));
    }

    /// Issue 27, finding 5: a 503 or 504 may come after the request was applied; a DELETE or POST sent again
    /// then fails (404) or duplicates. The work queue retries those, from the cluster's state.
    #[test]
    fn answers_that_may_follow_an_applied_request_are_not_retried() {
        for status in [StatusCode::SERVICE_UNAVAILABLE, StatusCode::GATEWAY_TIMEOUT] {
            assert_eq!(BriefRetry::default().next_wait(status, &headers(None)), None, "{status}");
        }
    }

    #[test]
    fn other_answers_are_not_retried() {
        for status in [StatusCode::OK, StatusCode::CONFLICT, StatusCode::INTERNAL_SERVER_ERROR, StatusCode::FORBIDDEN] {
            assert_eq!(BriefRetry::default().next_wait(status, &headers(Some("1"))), None, "{status}");
        }
    }
}
