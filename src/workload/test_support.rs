//! Shared fixtures for the workload writers' unit tests.

use super::patch::WorkloadWrite;
use crate::rules::{
    hash::ContentHash,
    resource::ConfigKind,
    strategy::{ReloadStrategy, TemplateChange},
};

/// A change of `kind` `name` (hash [`ContentHash::NONE`]) for `container`, in namespace `ns`.
pub fn change(kind: ConfigKind, name: &str, container: &str) -> TemplateChange {
    TemplateChange {
        kind,
        name: name.into(),
        namespace: "ns".into(),
        hash: ContentHash::NONE,
        container: container.into(),
        deleted: false,
    }
}

/// An env-vars write of `changes` at time 0 with the given hash record and nothing else.
pub fn env_write<'a>(changes: &'a [TemplateChange], applied_hashes: Option<&str>) -> WorkloadWrite<'a> {
    WorkloadWrite {
        strategy: ReloadStrategy::EnvVars,
        changes,
        changed_at: jiff::Timestamp::UNIX_EPOCH,
        applied_hashes: applied_hashes.map(str::to_owned),
        pause: None,
        restart: false,
        restart_pods_before: None,
        cronjob_reload: Default::default(),
        owed_jobs: None,
    }
}
