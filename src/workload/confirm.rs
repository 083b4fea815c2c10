//! Whether a write whose answer was lost landed (issue 38): a 5xx or a dropped connection can follow a write the
//! API server applied. The workload's metadata is read back once; when it carries exactly the annotations the
//! write set ([`metadata_fragment`]: the `applied-hashes` record and, for `evict-pods`/`delete-pods`, the boundary,
//! sent in the same PATCH as the template change), the write landed whole, and is reported as the reload it was
//! instead of as a failure.

use futures::future::BoxFuture;
use kube::Client;

use super::{
    WorkloadKey, WorkloadObject,
    kinds::{self, KindVisitor},
    patch::{WorkloadWrite, WriteStyle, json_api, metadata_fragment},
};

/// `Some(generation)` when `key` carries what `w` wrote (its `metadata.generation` now, when it has one); `None`
/// when it does not, or when the write cannot be recognised in the object: nothing in its metadata (no record
/// written), or a kind written otherwise than by one PATCH (a CronJob's spawned Job, a Job's recreation).
pub async fn landed(
    client: &Client,
    key: &WorkloadKey,
    w: &WorkloadWrite<'_>,
) -> Result<Option<Option<i64>>, kube::Error> {
    let Some(fragment) = metadata_fragment(w) else { return Ok(None) };
    let Some(metadata) = kinds::visit(key.kind, ReadMetadata { client, key }).await? else { return Ok(None) };
    let annotations = metadata.annotations.unwrap_or_default();
    let mut written = fragment["annotations"].as_object().into_iter().flatten();
    let carries = written.all(|(name, value)| annotations.get(name).map(String::as_str) == value.as_str());
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
            let object = json_api::<K>(client, &key.namespace).get_metadata(&key.name).await?;
            Ok(Some(object.metadata))
        })
    }
}
