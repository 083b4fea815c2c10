//! Alerts after reloads (`ALERT_ON_RELOAD`, `ALERT_SINK`, `ALERT_WEBHOOK_URL`, `ALERT_ADDITIONAL_INFO`,
//! `ALERT_WEBHOOK_PROXY`) and upstream's `--webhook-url` mode (a POST instead of a reload).
//!
//! Unlike upstream v1, which sends synchronously in the reload path with no timeout, alerts go through a bounded
//! queue to one sender task with a per-request timeout and retries with backoff; a full queue drops the alert
//! and counts it. Neither URL is ever logged (it usually carries a token).

pub mod payload;

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;

use crate::metrics::Metrics;
pub use payload::Sink;

/// Alerts waiting beyond this are dropped (counted in `reloader_alerts_total{result="dropped"}`).
const QUEUE: usize = 256;
/// Each request may take this long.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts per alert (first try plus retries).
const ATTEMPTS: u32 = 3;

/// Where and how to send.
#[derive(Clone, Debug)]
pub struct AlertConfig {
    /// Destination (never logged).
    pub url: String,
    /// Payload shape.
    pub sink: Sink,
    /// `ALERT_ADDITIONAL_INFO` (`Some("")` when set but empty, as upstream distinguishes).
    pub additional: Option<String>,
    /// Optional HTTP proxy.
    pub proxy: Option<String>,
    /// `--alert-structured` (upstream v2): a raw sink gets one JSON object per reload.
    pub structured: bool,
}

/// What to send.
#[derive(Debug)]
enum Job {
    /// An alert's content type and body.
    Alert(&'static str, String),
    /// `--webhook-url`'s body.
    Webhook(String),
}

/// Queues alerts to the sender task. Cheap to clone.
#[derive(Clone)]
pub struct Alerter {
    tx: mpsc::Sender<Job>,
    additional: Option<String>,
    sink: Sink,
    structured: bool,
    metrics: Arc<Metrics>,
}

impl Alerter {
    /// Builds the HTTP client and starts the sender task.
    pub fn spawn(cfg: AlertConfig, metrics: Arc<Metrics>) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none());
        if let Some(proxy) = cfg.proxy.as_deref().filter(|p| !p.is_empty()) {
            builder = builder
                .proxy(reqwest::Proxy::all(proxy).map_err(|e| format!("invalid alert proxy: {}", e.without_url()))?);
        }
        let client = builder.build().map_err(|e| format!("building the alert HTTP client: {e}"))?;
        let (tx, mut rx) = mpsc::channel::<Job>(QUEUE);
        let m = metrics.clone();
        let sink = cfg.sink;
        let url = cfg.url;
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let (sink, content_type, body) = match job {
                    Job::Alert(content_type, body) => (sink, content_type, body),
                    Job::Webhook(body) => (Sink::Slack, "application/json", body),
                };
                let result = send(&client, &url, sink, content_type, body).await;
                m.alerts.with_label_values(&[if result.is_ok() { "sent" } else { "failed" }]).inc();
                if let Err(e) = result {
                    tracing::warn!("Error sending alert: {e}");
                }
            }
        });
        Ok(Self { tx, additional: cfg.additional, sink, structured: cfg.structured, metrics })
    }

    fn enqueue(&self, job: Job) {
        if self.tx.try_send(job).is_err() {
            self.metrics.alerts.with_label_values(&["dropped"]).inc();
        }
    }

    /// Queues upstream's alert for one reloaded workload.
    pub fn reloaded(&self, reload: &payload::ReloadAlert<'_>) {
        let additional = self.additional.as_deref();
        let (content_type, body) = if self.structured && self.sink == Sink::Raw {
            let now = jiff::Timestamp::now();
            let now = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now).to_string();
            ("application/json", payload::structured(reload, additional, &now))
        } else {
            payload::body(self.sink, &payload::message(reload, additional))
        };
        self.enqueue(Job::Alert(content_type, body));
    }

    /// Ours (issue 17): a change whose rollout failed is held (the health gate). `message` names the resource,
    /// the failed workload and how to release it — never content.
    pub fn halted(&self, message: &str) {
        let additional = self.additional.as_deref();
        let message = match additional {
            Some(info) => format!("{info} : {message}"),
            None => message.to_owned(),
        };
        let (content_type, body) = if self.structured && self.sink == Sink::Raw {
            ("application/json", serde_json::json!({"event": "halt", "message": message}).to_string())
        } else {
            payload::body(self.sink, &message)
        };
        self.enqueue(Job::Alert(content_type, body));
    }

    /// Queues upstream's `--webhook-url` POST (sent instead of reloading) for a change of `config`.
    pub fn webhook(&self, config: &crate::index::ConfigKey, changed: Option<&crate::rules::keyprints::ChangedKeys>) {
        let body = payload::webhook_body(&config.kind.to_string(), &config.name, &config.namespace, changed);
        self.enqueue(Job::Webhook(body));
    }
}

async fn send(client: &reqwest::Client, url: &str, sink: Sink, content_type: &str, body: String) -> Result<(), String> {
    let mut delay = Duration::from_millis(500);
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let request = client.post(url).header(reqwest::header::CONTENT_TYPE, content_type).body(body.clone());
        match request.send().await {
            Ok(r) if sink.accepts(r.status().as_u16()) => return Ok(()),
            Ok(r) => last = format!("status {}", r.status()),
            // `without_url`: the URL usually carries a token.
            Err(e) => last = e.without_url().to_string(),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    Err(format!("{last} after {ATTEMPTS} attempts"))
}
