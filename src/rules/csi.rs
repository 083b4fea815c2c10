//! Secrets Store CSI integration (`--enable-csi-integration`): a SecretProviderClass "changes" when the
//! object versions the driver mounted for it change, as reported in SecretProviderClassPodStatus objects (one
//! per pod). Upstream hashes each status (§3.1) and compares old and new of the same object; with one status
//! per pod, a lagging pod could otherwise flip the class back and forth, so only a change of one status object's
//! own hash moves the class's hash (a new pod's status only seeds an unknown class).
//!
//! Pure: no client, no I/O; the controller watches the status objects and hands them in.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::rules::hash::{self, ContentHash};

/// secrets-store.csi.x-k8s.io/v1 SecretProviderClassPodStatus (the fields reloads need).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct SecretProviderClassPodStatus {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Status written by the driver.
    #[serde(default)]
    pub status: Option<PodStatus>,
}

/// `status` of a SecretProviderClassPodStatus.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// The class the pod mounts.
    #[serde(default)]
    pub secret_provider_class_name: String,
    /// The pod.
    #[serde(default)]
    pub pod_name: String,
    /// Mounted objects and their versions.
    #[serde(default)]
    pub objects: Vec<MountedObject>,
}

/// One mounted object.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct MountedObject {
    /// Object id.
    #[serde(default)]
    pub id: String,
    /// Object version.
    #[serde(default)]
    pub version: String,
}

/// secrets-store.csi.x-k8s.io/v1 SecretProviderClass; only its annotations (`ignore`, `match`) matter here.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct SecretProviderClass {
    /// Metadata.
    pub metadata: ObjectMeta,
}

impl_namespaced_resource!(
    SecretProviderClassPodStatus,
    "secrets-store.csi.x-k8s.io",
    "v1",
    "secretproviderclasspodstatuses"
);
impl_namespaced_resource!(SecretProviderClass, "secrets-store.csi.x-k8s.io", "v1", "secretproviderclasses");

impl SecretProviderClassPodStatus {
    /// The class name and upstream's hash of the mounted versions, if the driver wrote a status.
    pub fn class_hash(&self) -> Option<(String, ContentHash)> {
        let s = self.status.as_ref().filter(|s| !s.secret_provider_class_name.is_empty())?;
        let objects = s.objects.iter().map(|o| (o.id.as_str(), o.version.as_str()));
        Some((
            s.secret_provider_class_name.clone(),
            hash::secret_provider_class(&s.secret_provider_class_name, objects),
        ))
    }
}

/// What one status observation means for its class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsiUpdate {
    /// Nothing new.
    None,
    /// First status seen for a class: its baseline hash.
    Seed(ContentHash),
    /// This pod's mounted versions changed: the class's new hash.
    Changed(ContentHash),
}

/// Remembers each status object's last hash (20 bytes per CSI-using pod).
#[derive(Default)]
pub struct CsiTracker {
    statuses: HashMap<(String, String), ContentHash>,
}

impl CsiTracker {
    /// Records a status object's hash; `class_known` says whether the class already has a hash.
    pub fn observe(&mut self, namespace: &str, name: &str, hash: ContentHash, class_known: bool) -> CsiUpdate {
        match self.statuses.insert((namespace.to_owned(), name.to_owned()), hash) {
            Some(previous) if previous == hash => CsiUpdate::None,
            Some(_) => CsiUpdate::Changed(hash),
            None if class_known => CsiUpdate::None,
            None => CsiUpdate::Seed(hash),
        }
    }

    /// Forgets a deleted status object.
    pub fn forget(&mut self, namespace: &str, name: &str) {
        self.statuses.remove(&(namespace.to_owned(), name.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &str) -> ContentHash {
        hash::secret_provider_class("spc", [("secret/a", v)])
    }

    #[test]
    fn only_a_status_objects_own_change_moves_the_class() {
        let mut t = CsiTracker::default();
        assert_eq!(t.observe("ns", "pod-1", h("1"), false), CsiUpdate::Seed(h("1")));
        assert_eq!(t.observe("ns", "pod-2", h("1"), true), CsiUpdate::None, "another pod, same versions");
        assert_eq!(t.observe("ns", "pod-1", h("1"), true), CsiUpdate::None, "resync");
        assert_eq!(t.observe("ns", "pod-1", h("2"), true), CsiUpdate::Changed(h("2")));
        assert_eq!(
            t.observe("ns", "pod-2", h("2"), true),
            CsiUpdate::Changed(h("2")),
            "same new hash: the index sees no change"
        );
        assert_eq!(
            t.observe("ns", "pod-3", h("1"), true),
            CsiUpdate::None,
            "a new pod's status never moves a known class"
        );
    }

    #[test]
    fn status_hash_follows_upstream() {
        let s: SecretProviderClassPodStatus = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "status": {"secretProviderClassName": "spc", "podName": "pod", "objects": [{"id": "secret/a", "version": "1"}]}
        }))
        .expect("status");
        assert_eq!(s.class_hash(), Some(("spc".to_owned(), h("1"))));
        assert_eq!(SecretProviderClassPodStatus::default().class_hash(), None);
    }
}
