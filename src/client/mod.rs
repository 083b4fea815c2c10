//! The Kubernetes client, with every request counted in `rest_client_requests_total{code,method,host}` and
//! timed in `rest_client_request_duration_seconds{verb,host}` (the metrics upstream v1 hooks into client-go; its
//! load test and dashboards read them), throttled or unavailable answers retried briefly ([`retry`]), and streamed
//! lists asked for consistently ([`consistent_initial_events`]).

pub mod retry;

use std::task::{Context, Poll};

use futures::{FutureExt, future::BoxFuture};
use http::{Request, Response};
use kube::client::{Body, ClientBuilder};
use prometheus::{HistogramVec, IntCounterVec};
use tower::{BoxError, Layer, Service, buffer::BufferLayer, retry::RetryLayer, util::MapRequestLayer};

/// Requests waiting for the client's stack to take them.
const PENDING_REQUESTS: usize = 1024;

/// Builds a client from the usual sources (`KUBECONFIG`, `~/.kube/config`, in-cluster) whose requests are
/// counted in `counter` and timed in `duration`, each attempt of a retried one too.
pub async fn counted_client(counter: IntCounterVec, duration: HistogramVec) -> Result<kube::Client, kube::Error> {
    let mut config = kube::Config::infer().await.map_err(kube::Error::InferConfig)?;
    // kube's own retries can hold a request for minutes; ours are brief (see `retry`).
    config.default_retry = false;
    let host = config.cluster_url.authority().map(ToString::to_string).unwrap_or_default();
    let count = CountRequests { counter, duration, host };
    Ok(layered(ClientBuilder::try_from(config)?, &count))
}

/// `stack` (kube's: TLS, auth, the connection pool) with each request counted and briefly retried.
fn layered<S, B>(stack: ClientBuilder<S>, count: &CountRequests) -> kube::Client
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // A retry sends the request again through the stack below it, so that stack must be shareable: the buffer
    // makes it so (one task hands requests to kube's stack, whose connection pool is always ready).
    stack
        .with_layer(&MapRequestLayer::new(consistent_initial_events::<Body>))
        .with_layer(count)
        .with_layer(&BufferLayer::new(PENDING_REQUESTS))
        .with_layer(&RetryLayer::new(retry::BriefRetry::default()))
        .build()
}

/// Makes a streamed list a consistent read. kube's watcher asks for one (`sendInitialEvents=true`) at
/// `resourceVersion=0`, which lets the API server answer from its watch cache as it is, however far behind etcd:
/// a Deployment created just before the controller started could be missing from the initial state (seen under load
/// in `tests/isolation.rs`: "workloads=0" with the Deployment created before the start), come later as a new
/// workload, and take the content it meets then as its baseline: a change made in between would not be reloaded.
/// Without a resource version the server sends the initial state as of the request at least (Kubernetes API
/// concepts, "Streaming lists"; KEP-3157), as a list without one is. Every other request is left as it is.
pub fn consistent_initial_events<B>(mut request: Request<B>) -> Request<B> {
    use crate::constants::{ANY_RESOURCE_VERSION_QUERY as ANY_VERSION, STREAMED_LIST_QUERY as STREAMED};
    let Some(query) = request.uri().query() else {
        return request;
    };
    let pairs: Vec<&str> = query.split('&').collect();
    if !pairs.contains(&STREAMED) || !pairs.contains(&ANY_VERSION) {
        return request;
    }
    let kept: Vec<&str> = pairs.into_iter().filter(|pair| *pair != ANY_VERSION).collect();
    let mut parts = request.uri().clone().into_parts();
    let rewritten = format!("{}?{}", request.uri().path(), kept.join("&"));
    if let Ok(path_and_query) = rewritten.parse() {
        parts.path_and_query = Some(path_and_query);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// Sends a write whose response nothing reads, asking for the object's metadata only
/// ([`crate::constants::ACCEPT_METADATA_ONLY`]: a Deployment's PATCH response is 3.7 instead of 5.4 KB), and drops
/// the response undecoded.
pub async fn send_ignoring_response(client: &kube::Client, request: Request<Vec<u8>>) -> Result<(), kube::Error> {
    send_for_metadata(client, request).await.map(|_| ())
}

/// Sends a write asking for the object's metadata only, and returns the `metadata.generation` the object has
/// after it (`None` when the response does not say): only that field is decoded.
pub async fn send_for_generation(client: &kube::Client, request: Request<Vec<u8>>) -> Result<Option<i64>, kube::Error> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        generation: Option<i64>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Metadata,
    }
    let text = send_for_metadata(client, request).await?;
    Ok(serde_json::from_str::<Object>(&text).ok().and_then(|o| o.metadata.generation))
}

/// Whether a write that ended in `error` may have been applied all the same: the API server's own timeout and
/// other server errors (a webhook or etcd slow to answer: "may still be processing the request"), a gateway's
/// timeout, or a connection lost before the answer. A 4xx is the API server's verdict: nothing was applied.
pub fn outcome_unknown(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

async fn send_for_metadata(client: &kube::Client, mut request: Request<Vec<u8>>) -> Result<String, kube::Error> {
    let accept = http::HeaderValue::from_static(crate::constants::ACCEPT_METADATA_ONLY);
    request.headers_mut().insert(http::header::ACCEPT, accept);
    client.request_text(request).await
}

/// Counts requests by response code, method and host, and times them by verb and host.
#[derive(Clone)]
pub struct CountRequests {
    counter: IntCounterVec,
    duration: HistogramVec,
    host: String,
}

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted { inner, counter: self.counter.clone(), duration: self.duration.clone(), host: self.host.clone() }
    }
}

/// The counting service.
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    counter: IntCounterVec,
    duration: HistogramVec,
    host: String,
}

impl<S, B, R> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    R: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let (counter, duration, host) = (self.counter.clone(), self.duration.clone(), self.host.clone());
        let started = std::time::Instant::now();
        self.inner
            .call(req)
            .map(move |res| {
                // Until the response headers: a watch's long body is not its latency.
                duration.with_label_values(&[method.as_str(), host.as_str()]).observe(started.elapsed().as_secs_f64());
                let code = match &res {
                    Ok(r) => {
                        if let Some(date) = r.headers().get(http::header::DATE) {
                            server_clock::observe(date, jiff::Timestamp::now());
                        }
                        r.status().as_u16().to_string()
                    }
                    Err(_) => "<error>".to_owned(),
                };
                counter.with_label_values(&[code.as_str(), method.as_str(), host.as_str()]).inc();
                res
            })
            .boxed()
    }
}

/// The API server's clock, as the `Date` header of its answers shows it, so that waits on times it stamped (a
/// pod's `creationTimestamp` against a restart boundary) do not depend on this host's clock being right (issue 38).
pub mod server_clock {
    use std::sync::atomic::{AtomicI64, Ordering};

    /// The API server's time minus this host's, in milliseconds, from the latest answer (0 before one).
    static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

    /// Learns the offset from an answer's `Date` header received at `local` (this host's time). The header has
    /// whole seconds, cut down: the estimate is up to a second behind the API server, so a wait for one of its
    /// times ends up to a second late, never early.
    pub fn observe(date: &http::HeaderValue, local: jiff::Timestamp) {
        let Some(server) = date.to_str().ok().and_then(|d| jiff::fmt::rfc2822::parse(d).ok()) else { return };
        let offset = server.timestamp().duration_since(local).as_millis();
        OFFSET_MS.store(i64::try_from(offset).unwrap_or(0), Ordering::Relaxed);
    }

    /// The API server's time now, as last learned.
    pub fn now() -> jiff::Timestamp {
        let local = jiff::Timestamp::now();
        local.checked_add(jiff::SignedDuration::from_millis(OFFSET_MS.load(Ordering::Relaxed))).unwrap_or(local)
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
