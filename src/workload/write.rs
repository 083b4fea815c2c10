//! Writing a reload into a workload: the kind's type found through the kind table, which writes it the way its kind
//! is written (`kinds::write`: one strategic merge patch for kinds with a mutable pod template, the kind's own write
//! for the others). On top of the folder: it reaches a kind only through the table. What a write is and the pieces
//! the writes share are in `patch.rs`, below the kind files.

use futures::future::BoxFuture;
use kube::Client;

use super::{
    WorkloadKey, WorkloadObject,
    kinds::{self, KindVisitor},
    patch::WorkloadWrite,
};

/// Writes a reload the way its kind is written ([`WorkloadObject::WRITE`]). Returns the workload's
/// `metadata.generation` after the write when its response says (kinds whose rollouts are tracked): equal to the one
/// before, the template did not change.
pub async fn write(client: &Client, key: &WorkloadKey, w: &WorkloadWrite<'_>) -> Result<Option<i64>, kube::Error> {
    kinds::visit(key.kind, Write { client, key, w }).await
}

/// [`write`] for one kind's type.
struct Write<'a, 'w> {
    client: &'a Client,
    key: &'a WorkloadKey,
    w: &'a WorkloadWrite<'w>,
}

impl<'a, 'w> KindVisitor for Write<'a, 'w> {
    type Output = BoxFuture<'a, Result<Option<i64>, kube::Error>>;

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        let Self { client, key, w } = self;
        Box::pin(async move { kinds::write::<K>(client, key, w).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::strategy::ReloadStrategy;
    use crate::workload::WorkloadKind;

    /// A reload is one strategic merge PATCH as field manager `reloader`, asking for the metadata only; a
    /// response in either shape (or none decodable) is a success.
    #[tokio::test]
    async fn a_reload_is_one_patch_asking_for_metadata_only() {
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
        let client = Client::new(service, "default");
        let server = tokio::spawn(async move {
            let (request, respond) = handle.next_request().await.expect("a request");
            let shape = (
                request.method().to_string(),
                request.uri().to_string(),
                request.headers().get(http::header::ACCEPT).cloned(),
                request.headers().get(http::header::CONTENT_TYPE).cloned(),
            );
            let body = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web"}}"#;
            respond.send_response(http::Response::new(Body::from(body.as_bytes().to_vec())));
            shape
        });
        let key = WorkloadKey { kind: WorkloadKind::Deployment, namespace: "ns".into(), name: "web".into() };
        let w = WorkloadWrite {
            strategy: ReloadStrategy::Annotations,
            changes: &[],
            changed_at: jiff::Timestamp::UNIX_EPOCH,
            applied_hashes: Some("{}".into()),
            pause: None,
            restart: false,
            restart_pods_before: None,
            cronjob_reload: Default::default(),
            owed_jobs: None,
        };
        write(&client, &key, &w).await.expect("written");
        let (method, uri, accept, content_type) = server.await.expect("server");
        assert_eq!(method, "PATCH");
        assert_eq!(uri, "/apis/apps/v1/namespaces/ns/deployments/web?&fieldManager=reloader");
        assert_eq!(accept.as_ref().and_then(|v| v.to_str().ok()), Some(crate::constants::ACCEPT_METADATA_ONLY));
        assert_eq!(content_type.as_ref().and_then(|v| v.to_str().ok()), Some("application/strategic-merge-patch+json"));
    }
}
