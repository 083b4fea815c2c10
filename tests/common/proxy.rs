//! A plain-HTTP proxy between one controller and the test cluster's API server: it forwards every request with
//! the admin credentials and, once armed, loses the answer to chosen writes — the API server applies them, the
//! controller gets a 504 instead (a connection dropped after the write was committed, a timed-out load balancer).
//! It can also hold a lost answer until the test releases it (to change something in between), and fail the
//! controller's reads of the same object (so a read-back cannot tell it the write landed), and date every answer
//! as an API server whose clock is off would, and hold the controller's watch of a collection (its events wait,
//! in order, until the test lets them go: the controller plans from what it saw before).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{Router, body::Body, extract::State, response::Response};

/// The proxy, serving while this lives.
pub struct LosingProxy {
    state: Arc<ProxyState>,
    kubeconfig: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

struct ProxyState {
    client: kube::Client,
    /// PATCHes whose path ends with this lose their answer, while `to_lose` is above zero.
    path_suffix: String,
    to_lose: AtomicUsize,
    lost: AtomicUsize,
    /// GETs of the same path answered 503 (not forwarded) while above zero.
    reads_to_fail: AtomicUsize,
    /// Whether a lost answer waits for [`LosingProxy::release`] before it is answered.
    hold: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
    /// The next PATCH of a path ending with this is applied and its answer held until [`LosingProxy::release`].
    hold_next: std::sync::Mutex<Option<String>>,
    /// Answers held (lost or not) so far.
    held: AtomicUsize,
    /// Seconds added to the `Date` of every answer (negative: an API server whose clock is behind).
    clock_shift: std::sync::atomic::AtomicI64,
    /// PATCHes of a path ending with `path_suffix` answered by the API server so far (lost or not).
    patches: AtomicUsize,
    /// Watches of a path ending with this deliver nothing while it is set.
    watches_held: tokio::sync::watch::Sender<Option<String>>,
}

impl LosingProxy {
    /// Starts the proxy for PATCHes of paths ending in `path_suffix` (disarmed: nothing is lost yet), and writes a
    /// kubeconfig for it named after `name`.
    pub async fn start(name: &str, path_suffix: &str) -> Self {
        let client = testenv::harness::client_without_retries().await;
        let state = Arc::new(ProxyState {
            client,
            path_suffix: path_suffix.to_owned(),
            to_lose: AtomicUsize::new(0),
            lost: AtomicUsize::new(0),
            reads_to_fail: AtomicUsize::new(0),
            hold: std::sync::atomic::AtomicBool::new(false),
            release: tokio::sync::Notify::new(),
            hold_next: std::sync::Mutex::new(None),
            held: AtomicUsize::new(0),
            clock_shift: std::sync::atomic::AtomicI64::new(0),
            patches: AtomicUsize::new(0),
            watches_held: tokio::sync::watch::Sender::new(None),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr: SocketAddr = listener.local_addr().expect("proxy address");
        let app = Router::new().fallback(forward).with_state(state.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let kubeconfig = std::env::temp_dir().join(format!("reloader-proxy-{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://{addr}\nusers:\n\
             - name: proxy\n  user: {{}}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n\
             current-context: proxy\n"
        );
        std::fs::write(&kubeconfig, text).expect("write proxy kubeconfig");
        Self { state, kubeconfig, server }
    }

    /// The kubeconfig that points at the proxy.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Loses the answers to the next `count` matching PATCHes.
    pub fn arm(&self, count: usize) {
        self.state.to_lose.store(count, Ordering::SeqCst);
    }

    /// Holds each lost answer (the write applied) until [`Self::release`].
    pub fn hold_answers(&self) {
        self.state.hold.store(true, Ordering::SeqCst);
    }

    /// Holds the answer to the next PATCH of a path ending with `suffix` (applied, answered as usual once released):
    /// the controller's worker that sent it waits meanwhile.
    pub fn hold_next(&self, suffix: &str) {
        *self.state.hold_next.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(suffix.to_owned());
    }

    /// Dates every answer `seconds` off this host's clock from now on, as an API server whose clock is off would.
    pub fn shift_clock(&self, seconds: i64) {
        self.state.clock_shift.store(seconds, Ordering::SeqCst);
    }

    /// Answers held so far (each counted once the write was applied).
    pub fn held(&self) -> usize {
        self.state.held.load(Ordering::SeqCst)
    }

    /// Lets a held answer go (a lost one as its 504).
    pub fn release(&self) {
        self.state.release.notify_one();
    }

    /// Answers the next `count` GETs of the path 503, without forwarding them.
    pub fn fail_reads(&self, count: usize) {
        self.state.reads_to_fail.store(count, Ordering::SeqCst);
    }

    /// Answers lost so far (counted when the write was applied, before a held answer is released).
    pub fn lost(&self) -> usize {
        self.state.lost.load(Ordering::SeqCst)
    }

    /// PATCHes of the path answered by the API server so far (lost or not, counted before a held answer goes).
    pub fn patches(&self) -> usize {
        self.state.patches.load(Ordering::SeqCst)
    }

    /// Holds the events of every watch of a path ending with `suffix` (e.g. `/deployments`), open or opened later,
    /// until [`Self::release_watches`]; they are delivered then, in order.
    pub fn hold_watches(&self, suffix: &str) {
        self.state.watches_held.send_replace(Some(suffix.to_owned()));
    }

    /// Delivers the held watch events and everything after them.
    pub fn release_watches(&self) {
        self.state.watches_held.send_replace(None);
    }
}

impl Drop for LosingProxy {
    fn drop(&mut self) {
        self.server.abort();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Forwards one request; a matching PATCH, while armed, is applied and answered 504.
async fn forward(State(state): State<Arc<ProxyState>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else { return status(400, "unreadable body") };
    let mut outgoing = http::Request::builder().method(parts.method.clone()).uri(parts.uri.clone());
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "authorization" | "content-length" | "connection") {
            outgoing = outgoing.header(name, value);
        }
    }
    let Ok(outgoing) = outgoing.body(kube::client::Body::from(bytes.to_vec())) else {
        return status(400, "unforwardable request");
    };
    let lose = parts.method == http::Method::PATCH
        && parts.uri.path().ends_with(&state.path_suffix)
        && state.to_lose.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    let fail_read = parts.method == http::Method::GET
        && parts.uri.path().ends_with(&state.path_suffix)
        && state.reads_to_fail.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    if fail_read {
        return status(503, "the test proxy failed this read");
    }
    let hold_this = parts.method == http::Method::PATCH && {
        let mut next = state.hold_next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let matches = next.as_deref().is_some_and(|suffix| parts.uri.path().ends_with(suffix));
        if matches {
            *next = None;
        }
        matches
    };
    let watch = parts.method == http::Method::GET
        && parts.uri.query().is_some_and(|q| q.split('&').any(|p| p.starts_with("watch=")));
    let answer = match state.client.send(outgoing).await {
        Ok(answer) => answer,
        Err(e) => return status(502, &format!("proxy: {e}")),
    };
    if parts.method == http::Method::PATCH && parts.uri.path().ends_with(&state.path_suffix) {
        state.patches.fetch_add(1, Ordering::SeqCst);
    }
    if hold_this {
        state.held.fetch_add(1, Ordering::SeqCst);
        state.release.notified().await;
    }
    if lose {
        // Read the whole answer (the write is applied and answered), then lose it.
        let (_, body) = answer.into_parts();
        let _ = axum::body::to_bytes(Body::new(body), usize::MAX).await;
        state.lost.fetch_add(1, Ordering::SeqCst);
        if state.hold.load(Ordering::SeqCst) {
            state.held.fetch_add(1, Ordering::SeqCst);
            state.release.notified().await;
        }
        return status(504, "the test proxy lost the API server's answer");
    }
    let parts_path = parts.uri.path().to_owned();
    let (mut parts, body) = answer.into_parts();
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.remove(http::header::TRANSFER_ENCODING);
    let shift = state.clock_shift.load(Ordering::SeqCst);
    if shift != 0 {
        let dated = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_secs(shift)).expect("a date");
        let printer = jiff::fmt::rfc2822::DateTimePrinter::new();
        let date = printer.timestamp_to_rfc9110_string(&dated).expect("an HTTP date");
        parts.headers.insert(http::header::DATE, http::HeaderValue::from_str(&date).expect("a header value"));
    }
    if watch {
        // Each chunk (a watch event, or part of one) waits while the watch is held: none is lost or reordered.
        let held = state.watches_held.subscribe();
        let path: std::sync::Arc<str> = parts_path.into();
        let chunks = futures::StreamExt::then(Body::new(body).into_data_stream(), move |chunk| {
            let (mut held, path) = (held.clone(), path.clone());
            async move {
                let _ = held.wait_for(|held| !held.as_deref().is_some_and(|suffix| path.ends_with(suffix))).await;
                chunk
            }
        });
        return Response::from_parts(parts, Body::from_stream(chunks));
    }
    Response::from_parts(parts, Body::new(body))
}

fn status(code: u16, message: &str) -> Response {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                                  "reason": "Timeout", "code": code});
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_default()
}
