//! How each watch reads its collection at the start (and after a relist): **streamed** where the API server
//! streams lists — one watch request that first sends every current object, then a bookmark marking the end
//! (`sendInitialEvents`, Kubernetes' `WatchList`) — or **in pages** of a LIST. Streamed, a start at M2's 80,000
//! ConfigMaps and Secrets is one request per collection instead of 800 pages (bench/results/HISTORY.md, *Initial
//! lists*), and no page is held in memory.
//!
//! A stream falls back to pages, for good, the first time the API server refuses its streamed request: 403 (the
//! role grants `list` but not `watch`, as upstream v1's RBAC does for workloads — paged, the list still works and
//! the observer's per-change listing covers the missing watch, `observer/fallback.rs`), 400 or 422 (a server with
//! `WatchList` turned off: 1.27–1.33 by default, except 1.32). Servers older than 1.27 ignore `sendInitialEvents`
//! and would never mark the end of the initial events, so the watch would never sync: they are listed in pages
//! from the start, by the version the API server reports.

use futures::{Stream, StreamExt, stream::BoxStream};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;
use tracing::{debug, info};

/// How initial lists are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialLists {
    /// One watch request per collection that sends the current objects first, falling back to pages when refused.
    Streamed,
    /// LIST in pages, then watch.
    Paged,
}

/// The first minor version of Kubernetes 1 that knows `sendInitialEvents` (alpha `WatchList`): older ones ignore it.
const FIRST_MINOR_WITH_STREAMED_LISTS: u32 = 27;

impl InitialLists {
    /// Asks the API server its version once: streamed lists where it knows them, pages otherwise (or when it does
    /// not say).
    pub async fn for_server(client: &Client) -> Self {
        match client.apiserver_version().await {
            Ok(info) => {
                let lists = Self::for_version(&info.major, &info.minor);
                info!(version = info.git_version, "initial lists: {lists:?}");
                lists
            }
            Err(e) => {
                debug!("the API server's version is unknown ({e}): initial lists in pages");
                Self::Paged
            }
        }
    }

    /// By the API server's `major` and `minor` version (providers append to them: EKS's minor is `27+`).
    fn for_version(major: &str, minor: &str) -> Self {
        let number = |s: &str| s.trim_end_matches(|c: char| !c.is_ascii_digit()).parse::<u32>().ok();
        match (number(major), number(minor)) {
            (Some(1), Some(minor)) if minor >= FIRST_MINOR_WITH_STREAMED_LISTS => Self::Streamed,
            (Some(major), _) if major > 1 => Self::Streamed,
            _ => Self::Paged,
        }
    }
}

/// The watch of `api`'s collection with `cfg`, its initial lists read as `lists` says.
pub(super) fn watch_collection<K>(
    api: Api<K>,
    cfg: watcher::Config,
    lists: InitialLists,
) -> BoxStream<'static, watcher::Result<watcher::Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let paged = {
        let (api, cfg) = (api.clone(), cfg.clone());
        move || watcher(api, cfg).default_backoff().boxed()
    };
    match lists {
        InitialLists::Paged => paged(),
        InitialLists::Streamed => {
            let streamed = watcher(api, cfg.streaming_lists()).default_backoff().boxed();
            falling_back(streamed, move |code| {
                let resource = K::plural(&K::DynamicType::default()).into_owned();
                info!(
                    resource,
                    code, "the API server refused a streamed list of {resource} ({code}): listing it in pages"
                );
                paged()
            })
        }
    }
}

/// `first`'s items until it yields a refusal of its streamed list, which is dropped; from then on `fallback`'s
/// (given the refusal's status code).
fn falling_back<T, S, F>(first: S, fallback: F) -> BoxStream<'static, watcher::Result<T>>
where
    T: Send + 'static,
    S: Stream<Item = watcher::Result<T>> + Send + Unpin + 'static,
    F: FnOnce(u16) -> S + Send + 'static,
{
    futures::stream::unfold((first, Some(fallback)), |(mut stream, mut fallback)| async move {
        loop {
            let item = stream.next().await?;
            if let Some(code) = refusal(&item)
                && let Some(fallback) = fallback.take()
            {
                stream = fallback(code);
                continue;
            }
            return Some((item, (stream, fallback)));
        }
    })
    .boxed()
}

/// The status code of a watch request the API server refused as a streamed list: not granted (403), or not
/// served (400, 422: `sendInitialEvents` is refused while the `WatchList` feature is off).
fn refusal<T>(item: &watcher::Result<T>) -> Option<u16> {
    match item {
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(status))) if matches!(status.code, 400 | 403 | 422) => {
            Some(status.code)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use kube::runtime::watcher::{Error, Event};

    use super::*;

    fn refused(code: u16) -> Error {
        let status = kube::core::Status { code, message: "refused".into(), ..Default::default() };
        Error::WatchStartFailed(kube::Error::Api(status.boxed()))
    }

    fn described(items: Vec<watcher::Result<Event<u32>>>) -> Vec<String> {
        items
            .into_iter()
            .map(|item| match item {
                Ok(Event::Init) => "init".to_owned(),
                Ok(Event::InitApply(n)) => format!("listed {n}"),
                Ok(Event::InitDone) => "done".to_owned(),
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("error {:?}", crate::controller::translate::status_code(&e)),
            })
            .collect()
    }

    fn run(first: Vec<watcher::Result<Event<u32>>>, paged: Vec<watcher::Result<Event<u32>>>) -> Vec<String> {
        let first = futures::stream::iter(first).boxed();
        let out = falling_back(first, move |_| futures::stream::iter(paged).boxed());
        described(futures::executor::block_on(out.collect()))
    }

    fn paged() -> Vec<watcher::Result<Event<u32>>> {
        vec![Ok(Event::Init), Ok(Event::InitApply(2)), Ok(Event::InitDone)]
    }

    #[test]
    fn a_refused_streamed_list_is_listed_in_pages_instead_and_the_refusal_is_not_reported() {
        for code in [400, 403, 422] {
            let out = run(vec![Err(refused(code)), Ok(Event::Init), Ok(Event::InitApply(1))], paged());
            assert_eq!(out, ["init", "listed 2", "done"], "code {code}");
        }
    }

    #[test]
    fn a_streamed_list_the_api_server_serves_is_kept() {
        let out = run(vec![Ok(Event::Init), Ok(Event::InitApply(1)), Ok(Event::InitDone)], paged());
        assert_eq!(out, ["init", "listed 1", "done"]);
    }

    #[test]
    fn other_failures_are_reported_and_the_stream_keeps_streaming() {
        let out = run(vec![Err(refused(500)), Ok(Event::Init), Ok(Event::InitDone)], paged());
        assert_eq!(out, ["error Some(500)", "init", "done"]);
    }

    #[test]
    fn the_fallback_is_taken_once_and_its_own_refusals_are_reported() {
        let paged = vec![Err(refused(403)), Ok(Event::Init), Ok(Event::InitDone)];
        let out = run(vec![Err(refused(403))], paged);
        assert_eq!(out, ["error Some(403)", "init", "done"]);
    }

    #[test]
    fn streams_where_the_api_server_knows_streamed_lists() {
        for (major, minor, expected) in [
            ("1", "37", InitialLists::Streamed),
            ("1", "27", InitialLists::Streamed),
            ("1", "27+", InitialLists::Streamed),
            ("1", "26", InitialLists::Paged),
            ("1", "22+", InitialLists::Paged),
            ("2", "0", InitialLists::Streamed),
            ("", "", InitialLists::Paged),
            ("1", "x", InitialLists::Paged),
        ] {
            assert_eq!(InitialLists::for_version(major, minor), expected, "{major}.{minor}");
        }
    }
}
