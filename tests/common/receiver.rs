//! A local HTTP server standing in for Slack, Teams, Google Chat or a webhook endpoint.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{RELOAD_WAIT, wait_for};

/// How a test HTTP receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200 OK.
    Ok,
    /// 500.
    Fail,
    /// Never answers.
    Hang,
}

/// One request a [`Receiver`] got.
#[derive(Clone, Debug)]
pub struct Received {
    /// Request path.
    pub path: String,
    /// Content-Type header.
    pub content_type: String,
    /// Body.
    pub body: String,
}

/// A local HTTP server standing in for Slack, Teams, Google Chat or a webhook.
pub struct Receiver {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Starts listening.
    pub async fn start(answer: Answer) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let sink = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let sink = sink.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let (head, body) = loop {
                        let Ok(n) = conn.read(&mut chunk).await else { return };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf).into_owned();
                        if let Some((head, body)) = text.split_once("\r\n\r\n") {
                            let len = head
                                .lines()
                                .find_map(|l| {
                                    l.to_ascii_lowercase()
                                        .strip_prefix("content-length:")
                                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                                })
                                .unwrap_or(0);
                            if body.len() >= len {
                                break (head.to_owned(), body.to_owned());
                            }
                        }
                    };
                    let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
                    let content_type = head
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type:").map(|v| v.trim().to_owned()))
                        .unwrap_or_default();
                    sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Received {
                        path,
                        content_type,
                        body,
                    });
                    match answer {
                        Answer::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
                        Answer::Ok => {
                            let _ = conn
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                                .await;
                        }
                        Answer::Fail => {
                            let _ = conn.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                        }
                    }
                });
            }
        });
        Self { url, requests }
    }

    /// Requests so far.
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Waits until `n` requests arrived.
    pub async fn wait_requests(&self, n: usize) -> Vec<Received> {
        wait_for(&format!("{n} request(s) at the receiver"), RELOAD_WAIT, || async {
            let r = self.requests();
            if r.len() >= n { Ok(r) } else { Err(format!("{} so far", r.len())) }
        })
        .await
    }
}
