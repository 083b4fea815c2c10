//! One watch stream turned into observations: kube-runtime's watcher events mapped by the stream's own
//! functions, failures carried with the API server's status code, and a `Recovered` marker when a stream
//! delivers again after failing (readiness and fallbacks follow it, observe_failures.rs).

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
            let recovered = std::mem::replace(&mut failing, matches!(out, Some(Observed::Error { .. })));
            let recovered = (recovered && !failing).then_some(Observed::Recovered(id));
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
