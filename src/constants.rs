//! Every wire string in one place: annotation keys (defaults; all overridable by flags), env var naming,
//! field manager, label/field selectors. Values cite the upstream behaviour they copy.

/// Default annotation keys (upstream v1 `internal/pkg/options/flags.go`, reloader-behaviour.md §1.1).
pub mod annotation {
    /// Auto mode: reload when any referenced ConfigMap/Secret changes.
    pub const AUTO: &str = "reloader.stakater.com/auto";
    /// Typed auto mode, ConfigMaps only.
    pub const CONFIGMAP_AUTO: &str = "configmap.reloader.stakater.com/auto";
    /// Typed auto mode, Secrets only.
    pub const SECRET_AUTO: &str = "secret.reloader.stakater.com/auto";
    /// Typed auto mode, CSI SecretProviderClasses only (hard-coded in v1, a flag in v2).
    pub const SECRETPROVIDERCLASS_AUTO: &str = "secretproviderclass.reloader.stakater.com/auto";
    /// Named list of ConfigMaps (comma-separated anchored regexes).
    pub const CONFIGMAP_RELOAD: &str = "configmap.reloader.stakater.com/reload";
    /// Named list of Secrets.
    pub const SECRET_RELOAD: &str = "secret.reloader.stakater.com/reload";
    /// Named list of SecretProviderClasses.
    pub const SECRETPROVIDERCLASS_RELOAD: &str = "secretproviderclass.reloader.stakater.com/reload";
    /// Exclude list of ConfigMap names (exact, not regex).
    pub const CONFIGMAP_EXCLUDE: &str = "configmaps.exclude.reloader.stakater.com/reload";
    /// Exclude list of Secret names.
    pub const SECRET_EXCLUDE: &str = "secrets.exclude.reloader.stakater.com/reload";
    /// Exclude list of SecretProviderClass names.
    pub const SECRETPROVIDERCLASS_EXCLUDE: &str = "secretproviderclasses.exclude.reloader.stakater.com/reload";
    /// Search mode on the workload.
    pub const SEARCH: &str = "reloader.stakater.com/search";
    /// Marks a resource eligible for search mode.
    pub const MATCH: &str = "reloader.stakater.com/match";
    /// On a resource: it never triggers reloads.
    pub const IGNORE: &str = "reloader.stakater.com/ignore";
    /// Workload metadata: `restart` or `rollout` (upstream's, for Argo Rollouts; ours for every kind with a pod
    /// template).
    pub const ROLLOUT_STRATEGY: &str = "reloader.stakater.com/rollout-strategy";
    /// Ours (issue 29), on a workload or (`--namespace-rules`) a Namespace: `"true"` holds reloads until lifted.
    pub const PAUSE: &str = "reloader.stakater.com/pause";
    /// Ours (issue 29), on a CronJob: `spawn` (upstream's, the default: a Job now) or `patch` (the job template
    /// only: the next scheduled run uses the new content).
    pub const CRONJOB_RELOAD: &str = "reloader.stakater.com/cronjob-reload";
    /// Ours (issue 29), written on a workload by the `evict-pods`/`delete-pods` strategies: its pods created before
    /// this time are still to restart (`crate::rules::pod_restarts`); removed once none is left.
    pub const RESTART_PODS_CREATED_BEFORE: &str = "reloader.stakater.com/restart-pods-created-before";
    /// `kubectl rollout restart`'s mark on a pod template: the `restart` strategy writes it.
    pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
    /// Deployment metadata: Go duration to pause after a reload.
    pub const PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";
    /// Deployment metadata, written by the controller: when it paused the Deployment.
    pub const PAUSED_AT: &str = "deployment.reloader.stakater.com/paused-at";
    /// Key-level reloads, per workload (ours): `keys-used` or `any-key`.
    pub const RELOAD_ON: &str = "reloader.stakater.com/reload-on";
    /// Ours (issue 17), on a workload: its rollout wave; lower waves complete before higher ones start.
    pub const ROLLOUT_WAVE: &str = "reloader.stakater.com/rollout-wave";
    /// Ours (issue 17), on a workload: `"true"`/`"false"` overrides `--halt-on-failed-rollout` for it.
    pub const HALT_ON_FAILED_ROLLOUT: &str = "reloader.stakater.com/halt-on-failed-rollout";
    /// Ours (issue 17), on a workload: when its reloads may happen (`crate::rules::window`).
    pub const RELOAD_WINDOW: &str = "reloader.stakater.com/reload-window";
    /// Ours (issue 17), on a ConfigMap/Secret/SecretProviderClass: the hold id of a halted change, to release it.
    pub const RELEASE_HOLD: &str = "reloader.stakater.com/release-hold";
    /// Ours (issue 38), on a ConfigMap or Secret: the namespaces (comma list, `*` for all) whose
    /// workloads may name it in a `<namespace>/<name>` entry, with `--allow-cross-namespace-references`.
    pub const ALLOW_REFERENCES_FROM: &str = "reloader.stakater.com/allow-references-from";
    /// Workload metadata, written by this controller (not upstream): JSON of the hashes the workload was last
    /// rolled with or baselined at, per resource. Metadata does not roll pods; it lets a restarted controller
    /// apply exactly once a change made while it was down, even to workloads never reloaded before.
    pub const APPLIED_HASHES: &str = "reloader.stakater.com/applied-hashes";
    /// Pod template, written by the annotations strategy: JSON record of the last trigger (§3.3).
    pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";
}

/// Size budget of one workload's `applied-hashes` record (bytes of JSON). A named list matching thousands of
/// resources, or a workload whose `last-applied-configuration` fills most of the 256 KiB annotation limit,
/// must not make the record (or the reload it rides with) fail: entries past the budget are left out, those
/// with no other memory on the object first kept (see `index::plan`).
pub const APPLIED_HASHES_BUDGET: usize = 4096;

/// Env var names: `STAKATER_<SANITISED NAME>_<KIND>` (upstream `getEnvVarName`, §3.2).
pub const ENV_VAR_PREFIX: &str = "STAKATER_";

/// Annotation upstream puts on Jobs it creates from CronJobs (as `kubectl create job --from=cronjob/…`).
pub const CRONJOB_INSTANTIATE: (&str, &str) = ("cronjob.kubernetes.io/instantiate", "manual");

/// The Secret, in the controller's namespace, holding the Job recreations owed (`crate::workload::owed_jobs`).
pub const OWED_JOBS_SECRET: &str = "reloader-owed-jobs";

/// Field manager for every write (upstream v2 uses `reloader`).
pub const FIELD_MANAGER: &str = "reloader";

/// `Accept` of writes whose response is dropped: the object's metadata only (the API server's
/// `PartialObjectMetadata` conversion, as `kubectl get -o name` uses), or the whole object from a server that
/// cannot convert it.
pub const ACCEPT_METADATA_ONLY: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";

/// Helm stores releases in Secrets of this type; they are large, numerous and never mounted by pods, so the
/// Secret watch excludes them server-side (design.md "Memory").
pub const SECRET_FIELD_SELECTOR: &str = "type!=helm.sh/release.v1";

/// Value that turns an annotation on (compared exactly, as upstream does for `ignore`, `match`, `search`).
pub const TRUE: &str = "true";

/// The reason of a Deployment's `Progressing=False` condition once its `progressDeadlineSeconds` passed.
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// `spec.updateStrategy.type` of StatefulSets and DaemonSets that replace a pod only once it is deleted.
pub const ON_DELETE: &str = "OnDelete";

/// Page size of the initial ConfigMap/Secret lists where they are listed in pages (not streamed:
/// `controller/initial_lists.rs`). kube's default (500, client-go's) holds 500 full objects —
/// their data included — plus the page's JSON at once per stream; with 4 KiB objects that is several MiB the
/// allocator keeps after the sync. 100 objects per page bounds that buffer (bench/results/HISTORY.md, M1).
pub const CONFIG_LIST_PAGE_SIZE: u32 = 100;

/// Page size of the initial workload lists (where paged), for the same reason: a Deployment's JSON (its `managedFields`
/// included) is several KiB, and a page of 500 was the largest buffer of the startup list (heaptrack, M1).
pub const WORKLOAD_LIST_PAGE_SIZE: u32 = 100;

/// upstream v1 `pkg/common/metainfo.go`: the ConfigMap describing the running controller.
pub mod meta_info {
    /// Its name.
    pub const CONFIGMAP_NAME: &str = "reloader-meta-info";
    /// Its label `(key, value)`.
    pub const LABEL: (&str, &str) = ("reloader.stakater.com/meta-info", "reloader");
    /// `buildInfo.edition`.
    pub const EDITION: &str = "oss";
}

/// The query pair by which a watch asks for a streamed list (the initial state first, then changes).
pub const STREAMED_LIST_QUERY: &str = "sendInitialEvents=true";

/// The query pair kube's watcher sends with a streamed list: "any resource version", which the API server may serve
/// from a watch cache behind etcd (`client::consistent_initial_events` drops it).
pub const ANY_RESOURCE_VERSION_QUERY: &str = "resourceVersion=0";
