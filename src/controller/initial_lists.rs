//! How the watches read what exists at start: streamed by the API server from its watch cache (a watch with
//! `sendInitialEvents`, Kubernetes' `WatchList`), or listed in pages where the API server does not stream.
//!
//! Streamed, the objects arrive one by one on one connection: no page is held whole (a page of full ConfigMaps is
//! the largest buffer of a start), and there is no round trip per page. At M2 (80,000 ConfigMaps and Secrets,
//! 12,000 workloads) the controller is ready after 2.5 s instead of 6.0 s with pages of 100, at the same memory
//! (bench/results/HISTORY.md, issue 39). One probe at start decides for every watch: a watch for a label nothing
//! carries, which a streaming API server answers at once with the bookmark that ends its (empty) initial events.
//! Any other answer — refused (the `WatchList` feature gate off, a server before it), an error, no answer in
//! [`PROBE_TIMEOUT`] — means pages, as before. What the probe cannot vouch for is always listed: optional APIs
//! (Argo Rollouts, DeploymentConfigs, `--workload-kind` kinds), which another API server may serve.

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Client,
    api::{Api, PartialObjectMeta, WatchEvent, WatchParams},
    runtime::watcher,
};
use tracing::info;

use crate::{constants::INITIAL_EVENTS_END, resource::ConfigKind};

/// The longest the probe waits for the API server's answer (its watch asks the server to end it after 10 s too).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A label selector no object matches: the probe's watch has no initial events, only their end.
const NOTHING: &str = "reloader.stakater.com/initial-list-probe=none";

/// How every watch reads what exists at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialLists {
    /// Streamed by the API server (`sendInitialEvents`).
    Streamed,
    /// Listed in pages.
    Paged,
}

impl InitialLists {
    /// The watcher configuration: streamed, or in pages of `page_size`.
    pub fn config(self, page_size: u32) -> watcher::Config {
        match self {
            Self::Streamed => watcher::Config::default().streaming_lists(),
            Self::Paged => watcher::Config::default().page_size(page_size),
        }
    }

    /// Asks the API server whether it streams initial lists, with a watch of `kind` (the first ConfigMap or Secret
    /// source the controller watches, so its RBAC allows it) in `namespace` (`None`: all).
    pub async fn probe(client: &Client, namespace: Option<&str>, kind: Option<ConfigKind>) -> Self {
        let params = WatchParams::streaming_lists().labels(NOTHING).timeout(10);
        let answer = match kind {
            Some(ConfigKind::Secret) => streams_lists(api::<Secret>(client, namespace), &params).await,
            Some(ConfigKind::ConfigMap) => streams_lists(api::<ConfigMap>(client, namespace), &params).await,
            _ => Err("no ConfigMap or Secret is watched".to_owned()),
        };
        match answer {
            Ok(()) => {
                info!("initial lists are streamed by the API server (WatchList)");
                Self::Streamed
            }
            Err(reason) => {
                info!("initial lists are read in pages: the API server does not stream them ({reason})");
                Self::Paged
            }
        }
    }
}

/// The metadata of `K` in `namespace` (`None`: all).
fn api<K>(client: &Client, namespace: Option<&str>) -> Api<PartialObjectMeta<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// `Ok` when the watch's first event is the bookmark that ends the initial events.
async fn streams_lists<K>(api: Api<K>, params: &WatchParams) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let first = tokio::time::timeout(PROBE_TIMEOUT, async {
        let stream = api.watch(params, "0").await.map_err(|e| e.to_string())?;
        futures::pin_mut!(stream);
        stream.try_next().await.map_err(|e| e.to_string())
    });
    match first.await {
        Err(_) => Err(format!("no answer in {PROBE_TIMEOUT:?}")),
        Ok(Err(e)) => Err(e),
        Ok(Ok(Some(WatchEvent::Bookmark(b)))) if b.metadata.annotations.contains_key(INITIAL_EVENTS_END) => Ok(()),
        Ok(Ok(Some(WatchEvent::Error(e)))) => Err(e.message),
        Ok(Ok(other)) => Err(format!("the watch began with {}", event_name(other.as_ref()))),
    }
}

fn event_name<K>(event: Option<&WatchEvent<K>>) -> &'static str {
    match event {
        None => "its end",
        Some(WatchEvent::Added(_)) => "an added object",
        Some(WatchEvent::Modified(_)) => "a modified object",
        Some(WatchEvent::Deleted(_)) => "a deleted object",
        Some(WatchEvent::Bookmark(_)) => "a bookmark not ending initial events",
        Some(WatchEvent::Error(_)) => "an error",
    }
}
