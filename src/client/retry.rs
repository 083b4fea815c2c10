//! Brief client-side retries of throttled and unavailable responses (429, 503, 504).
//!
//! kube's default policy retries those up to 15 times with a backoff growing to minutes (≈ 3 minutes in all
//! for a lasting 503). The request's caller waits all that time: a workload whose API answers 503 for good (an
//! aggregated API down, a webhook answering 503) held a worker each time it was tried, and four such workloads
//! held every worker, so no other workload reloaded. Here a request is tried again at most [`RETRIES`] times,
//! for at most [`MAX_WAIT`] each; after that the error goes back to the caller, and the controller's work
//! queue retries the workload with its own backoff while its workers serve the others.
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

/// The retry policy: [`RETRIES`] more attempts for 429, 503 and 504 answers.
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
        let retryable = matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
        );
        if !retryable || self.left == 0 {
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
    fn unavailable_is_retried_three_times_with_doubling_waits() {
        let mut policy = BriefRetry::default();
        let waits: Vec<_> = (0..4).map(|_| policy.next_wait(StatusCode::SERVICE_UNAVAILABLE, &headers(None))).collect();
        let ms = Duration::from_millis;
        assert_eq!(waits, [Some(ms(50)), Some(ms(100)), Some(ms(200)), None]);
    }

    #[test]
    fn retry_after_sets_the_wait_up_to_the_cap() {
        let mut policy = BriefRetry::default();
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(Some("1"))), Some(Duration::from_secs(1)));
        assert_eq!(policy.next_wait(StatusCode::GATEWAY_TIMEOUT, &headers(Some("2"))), Some(Duration::from_secs(2)));
        // Longer than a request may hold its caller: the caller gets the answer (its queue waits instead).
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(Some("30"))), None);
        // Not a number of seconds: the backoff applies.
        let mut policy = BriefRetry::default();
        let date = Some("Fri, 04 Dec 2026 14:00:00 GMT");
        assert_eq!(policy.next_wait(StatusCode::TOO_MANY_REQUESTS, &headers(date)), Some(FIRST_WAIT));
    }

    #[test]
    fn other_answers_are_not_retried() {
        for status in [StatusCode::OK, StatusCode::CONFLICT, StatusCode::INTERNAL_SERVER_ERROR, StatusCode::FORBIDDEN] {
            assert_eq!(BriefRetry::default().next_wait(status, &headers(Some("1"))), None, "{status}");
        }
    }
}
