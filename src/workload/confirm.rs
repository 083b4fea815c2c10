//! Whether a write whose answer was lost landed (issue 38): a 5xx or a dropped connection can follow a write the
//! API server applied. The workload's metadata is read back once; when it carries exactly what the write set —
//! the `applied-hashes` record and, for `evict-pods`/`delete-pods`, the boundary, sent in the same PATCH as the
//! template change — the write landed whole, and is reported as the reload it was instead of as a failure.

use futures::future::BoxFuture;
use kube::{Client, api::GetParams};

use super::{
    WorkloadKey, WorkloadObject,
    kinds::{self, KindVisitor},
    patch::{WorkloadWrite, WriteStyle},
};
use crate::constants::annotation::{APPLIED_HASHES, RESTART_PODS_CREATED_BEFORE};

/// `Some(generation)` when `key` carries what `w` wrote (its `metadata.generation` now, when it has one); `None`
/// when it does not, or when the write cannot be recognised in the object: nothing in its metadata (no record
/// written), or a kind written otherwise than by one PATCH (a CronJob's spawned Job, a Job's recreation).
pub async fn landed(
    client: &Client,
    key: &WorkloadKey,
    w: &WorkloadWrite<'_>,
) -> Result<Option<Option<i64>>, kube::Error> {
    let marks: Vec<(&str, &str)> =
        [(APPLIED_HASHES, &w.applied_hashes), (RESTART_PODS_CREATED_BEFORE, &w.restart_pods_before)]
            .into_iter()
            .filter_map(|(annotation, value)| value.as_deref().map(|v| (annotation, v)))
            .collect();
    if marks.is_empty() {
        return Ok(None);
    }
    let Some(metadata) = kinds::visit(key.kind, ReadMetadata { client, key }).await? else { return Ok(None) };
    let annotations = metadata.annotations.unwrap_or_default();
    let carries =
        marks.iter().all(|(annotation, value)| annotations.get(*annotation).map(String::as_str) == Some(*value));
    Ok(carries.then_some(metadata.generation))
}

/// The workload's metadata, for kinds written by one PATCH (`None` for the others).
struct ReadMetadata<'a> {
    client: &'a Client,
    key: &'a WorkloadKey,
}

type Metadata = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

impl<'a> KindVisitor for ReadMetadata<'a> {
    type Output = BoxFuture<'a, Result<Option<Metadata>, kube::Error>>;

    fn visit<K: WorkloadObject>(self) -> Self::Output {
        let Self { client, key } = self;
        Box::pin(async move {
            if !matches!(K::WRITE, WriteStyle::TemplatePatch | WriteStyle::MergePatch { .. }) {
                return Ok(None);
            }
            let url = K::url_path(&(), Some(&key.namespace));
            let request = kube::core::Request::new(url)
                .get(&key.name, &GetParams::default())
                .map_err(kube::Error::BuildRequest)?;
            crate::client::get_metadata(client, request).await.map(Some)
        })
    }
}
