//! One watch stream turned into observations: kube-runtime's watcher events mapped by the stream's own
//! functions, failures carried with the API server's status code, and a `Recovered` marker when a stream
//! delivers again after failing (readiness and fallbacks follow it, observer/failures.rs).

use futures::{Stream, StreamExt, stream::BoxStream};
use kube::runtime::watcher;

use super::Observed;

/// Maps watcher events of stream `id`: `applied` for objects listed or changed, `deleted` for deletions.
pub(super) fn translate<K, S, A, D>(stream: S, id: usize, applied: A, deleted: D) -> BoxStream<'static, Observed>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    A: Fn(K, bool) -> Option<Observed> + Send + 'static,
    D: Fn(K) -> Option<Observed> + Send + 'static,
{
    let mut failing = false;
    stream
        .flat_map(move |res| {
            let out = match res {
                Ok(watcher::Event::Init) => Some(Observed::ListStarted(id)),
                Ok(watcher::Event::InitDone) => Some(Observed::ListDone(id)),
                Ok(watcher::Event::InitApply(obj)) => applied(obj, true),
                Ok(watcher::Event::Apply(obj)) => applied(obj, false),
                Ok(watcher::Event::Delete(obj)) => deleted(obj),
                Err(e) => Some(Observed::Error { stream: id, code: status_code(&e), message: e.to_string() }),
            };
            // Recovered only once the API server delivered again: the watcher announces each retry's relist
            // (`Init`) before the list request, so a stream refused on every retry would otherwise flap between
            // failing and recovered (seen as a 0 in `reloader_watch_failing` for a forbidden kind).
            let recovered = match out {
                Some(Observed::Error { .. }) => {
                    failing = true;
                    false
                }
                Some(Observed::ListStarted(_)) => false,
                _ => std::mem::replace(&mut failing, false),
            };
            let recovered = recovered.then_some(Observed::Recovered(id));
            futures::stream::iter(recovered.into_iter().chain(out))
        })
        .boxed()
}

/// The HTTP status the API server answered a failed list or watch with.
pub(super) fn status_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use kube::runtime::watcher::{Error, Event};

    use super::*;

    fn forbidden() -> Error {
        let status = kube::core::Status { code: 403, message: "forbidden".into(), ..Default::default() };
        Error::InitialListFailed(kube::Error::Api(status.boxed()))
    }

    #[tokio::test]
    async fn a_stream_refused_on_every_retry_stays_failing_and_recovers_when_it_delivers() {
        let events: Vec<Result<Event<u32>, Error>> =
            vec![Err(forbidden()), Ok(Event::Init), Err(forbidden()), Ok(Event::Init), Ok(Event::InitDone)];
        let out: Vec<String> = translate(futures::stream::iter(events), 7, |_, _| None, |_| None)
            .map(|o| match o {
                Observed::Error { stream, code, .. } => format!("error {stream} {code:?}"),
                Observed::ListStarted(id) => format!("list {id}"),
                Observed::ListDone(id) => format!("done {id}"),
                Observed::Recovered(id) => format!("recovered {id}"),
                other => format!("{other:?}"),
            })
            .collect()
            .await;
        let expected = ["error 7 Some(403)", "list 7", "error 7 Some(403)", "list 7", "recovered 7", "done 7"];
        assert_eq!(out, expected, "a retry's relist announcement is not a recovery");
    }
}
