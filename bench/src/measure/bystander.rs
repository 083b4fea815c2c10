//! Another client's view of the API server while a scenario runs (issue 39): a GET of one ConfigMap and a LIST of
//! one namespace's ConfigMaps (a page of 50), one after the other every 50 ms, from the update phase's start to
//! the end of the window. Their latency says whether the controller's writes slow everyone else down; it is the
//! same loop, with the same objects, for every controller compared.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use tokio::{sync::oneshot, task::JoinHandle};

/// Pause between two rounds (a GET and a LIST).
const INTERVAL: Duration = Duration::from_millis(50);
/// Objects per LIST.
const LIST_PAGE: u32 = 50;

/// The running loop.
pub struct Bystander {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Samples>,
}

/// Request latencies (ms) and failed requests.
#[derive(Default)]
pub struct Samples {
    /// Latencies of GETs and LISTs that succeeded (ms).
    pub latencies_ms: Vec<f64>,
    /// Requests that failed (a 429 included).
    pub errors: usize,
}

impl Bystander {
    /// Starts the loop against `namespace`'s ConfigMap `name` and its ConfigMaps.
    pub fn start(client: kube::Client, namespace: &str, name: &str) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        let name = name.to_owned();
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut samples = Samples::default();
            let list = ListParams::default().limit(LIST_PAGE);
            loop {
                let started = Instant::now();
                let ok = api.get(&name).await.is_ok();
                samples.record(ok, started);
                let started = Instant::now();
                let ok = api.list(&list).await.is_ok();
                samples.record(ok, started);
                tokio::select! {
                    _ = &mut stopped => return samples,
                    () = tokio::time::sleep(INTERVAL) => {}
                }
            }
        });
        Self { stop, task }
    }

    /// Stops the loop and returns what it measured.
    pub async fn finish(self) -> Samples {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

impl Samples {
    fn record(&mut self, ok: bool, started: Instant) {
        if ok {
            self.latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        } else {
            self.errors += 1;
        }
    }
}
