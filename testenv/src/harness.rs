//! Integration-test helpers: a client for the test cluster, a fresh namespace per test, bounded waits whose
//! failure message says what was awaited and what was last seen.
//!
//! The cluster comes from `RELOADER_TEST_KUBECONFIG`: `make test` (via `testenv run`) sets it to the local
//! control plane it started; set it yourself to run the suite against kind, k3d or any other cluster.

use std::{
    future::Future,
    path::PathBuf,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};

/// Env var naming the kubeconfig of the cluster the integration tests use.
pub const KUBECONFIG_ENV: &str = "RELOADER_TEST_KUBECONFIG";
/// Label put on every test namespace, so leftovers can be found (`kubectl get ns -l reloader-test`).
pub const TEST_NAMESPACE_LABEL: &str = "reloader-test";

/// Path of the test cluster's kubeconfig; panics with instructions when it is not set.
pub fn kubeconfig_path() -> PathBuf {
    match std::env::var_os(KUBECONFIG_ENV) {
        Some(p) => PathBuf::from(p),
        None => panic!(
            "{KUBECONFIG_ENV} is not set. Run the integration tests with `make test` (it starts a local control \
             plane), or `cargo run -p testenv -- run -- cargo test`, or point {KUBECONFIG_ENV} at the kubeconfig \
             of an existing cluster (kind, k3d)."
        ),
    }
}

/// An admin client for the test cluster.
pub async fn client() -> Client {
    client_with(|_| {}).await
}

/// An admin client that does not retry 429, 503 and 504 answers (kube's default retries one for minutes): for
/// a test that expects such an answer.
pub async fn client_without_retries() -> Client {
    client_with(|config| config.default_retry = false).await
}

async fn client_with(adjust: impl FnOnce(&mut kube::Config)) -> Client {
    crate::install_crypto_provider();
    let path = kubeconfig_path();
    let built = match crate::cluster::config_from_kubeconfig(&path).await {
        Ok(mut config) => {
            adjust(&mut config);
            Client::try_from(config).map_err(crate::Error::Kube)
        }
        Err(e) => Err(e),
    };
    built.unwrap_or_else(|e| panic!("cannot build a client from {}: {e}", path.display()))
}

/// A namespace created for one test and deleted when dropped (set `RELOADER_TEST_KEEP_NAMESPACES=1` to keep
/// it for debugging).
pub struct TestNamespace {
    /// The namespace name.
    pub name: String,
    /// An admin client.
    pub client: Client,
}

impl TestNamespace {
    /// Creates `<prefix>-<unique suffix>`; `prefix` is usually the test's name.
    pub async fn create(prefix: &str) -> Self {
        Self::create_with_labels(prefix, &[]).await
    }

    /// Like [`TestNamespace::create`], with extra namespace labels.
    pub async fn create_with_labels(prefix: &str, labels: &[(&str, &str)]) -> Self {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let client = client().await;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
        let suffix =
            format!("{:x}{:x}{}", std::process::id() % 4096, nanos % 65536, SEQ.fetch_add(1, Ordering::Relaxed));
        let mut stem: String =
            prefix.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        stem.truncate(62 - suffix.len());
        let name = format!("{}-{suffix}", stem.trim_matches('-'));
        let mut all_labels = serde_json::Map::new();
        all_labels.insert(TEST_NAMESPACE_LABEL.into(), "true".into());
        for (k, v) in labels {
            all_labels.insert((*k).into(), (*v).into());
        }
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": all_labels}
        }))
        .expect("namespace literal");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating test namespace {name}: {e}"));
        Self { name, client }
    }

    /// A namespaced API for `K` in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if std::env::var_os("RELOADER_TEST_KEEP_NAMESPACES").is_some() {
            return;
        }
        let name = self.name.clone();
        // Deletion is asynchronous in the cluster (KCM finalizes it); we only ask for it.
        cleanup_from_drop(move |client| async move {
            let _ = Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()).await;
        });
    }
}

/// Runs `cleanup` with an admin client from a `Drop`, and returns once it has finished: drop cannot await, and
/// the test's runtime may be shutting down, so it runs on a thread with its own runtime and client.
pub fn cleanup_from_drop<F, Fut>(cleanup: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        rt.block_on(async { cleanup(client().await).await });
    })
    .join();
}

/// Polls `probe` every 100 ms until it returns `Ok`, and returns that value. `probe` returns `Err(seen)`
/// describing what it saw; on timeout this panics with `what` and the last `seen`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        let seen = match probe().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `probe` for the whole `period` and panics as soon as it returns `Err(seen)`: for asserting that
/// something does NOT happen (no rollout, no patch) within a bounded wait.
pub async fn holds_for<F, Fut>(what: &str, period: Duration, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    while start.elapsed() < period {
        if let Err(seen) = probe().await {
            panic!("expected {what} to hold for {period:?}, but after {:?}: {seen}", start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
