//! The errors of one reconcile, and which of them the work queue retries.

use std::time::Duration;

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The patch was rejected or could not be sent.
    #[error("patching {workload} for {resources}: {source}")]
    Patch {
        /// The workload.
        workload: String,
        /// The resources it was reloaded for.
        resources: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading resources for key-level reloads failed.
    #[error("reading {resources} for {workload}: {source}")]
    Read {
        /// The workload.
        workload: String,
        /// The resources.
        resources: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Restarting a pod (`evict-pods`, `delete-pods`) failed, or reading what it needs.
    #[error("restarting the pods of {workload}: {source}")]
    PodRestart {
        /// The workload.
        workload: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The reconcile panicked (a bug met by some object): contained, counted and retried with backoff, so
    /// the worker and every other workload go on.
    #[error("reconciling {workload} panicked: {message}")]
    Panicked {
        /// The workload.
        workload: String,
        /// The panic's message.
        message: String,
    },
}

impl Error {
    /// The API server's `Retry-After` (sent with 429 Too Many Requests), zero when none.
    pub fn retry_after(&self) -> Duration {
        match self {
            Self::Patch { source: kube::Error::Api(status), .. } => {
                Duration::from_secs(status.details.as_ref().map_or(0, |d| u64::from(d.retry_after_seconds)))
            }
            _ => Duration::ZERO,
        }
    }

    /// Conflicts, throttling, server errors, transport failures and missing permissions are retried (with the
    /// capped backoff: a Role removed and restored must not leave a change unapplied until the next one — found
    /// by the chaos suite, RELIABILITY.md fault 5); a verdict on the write itself (invalid, denied by admission,
    /// gone) is not.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Patch { source: kube::Error::Api(status), .. } => match status.code {
                409 | 429 | 401 => true,
                // RBAC ("cannot patch resource …") may come back; an admission webhook's or policy's denial is a
                // verdict on this write.
                403 => !status.message.contains("denied"),
                code => code >= 500,
            },
            Self::Patch { .. } | Self::Read { .. } | Self::PodRestart { .. } | Self::Panicked { .. } => true,
        }
    }
}

#[cfg(test)]
#[path = "reconcile_error_tests.rs"]
mod tests;
