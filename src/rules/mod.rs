//! The functional core: the pure rules. Every module here decides from the values it is given — no Kubernetes
//! client, no network, no filesystem, no tokio tasks, no clock (the caller passes `now`). The shell around it
//! (`controller`, `workload`, `index`, `client`, `events`, `alerts`, `explain`) reads the cluster, calls these
//! rules and writes their answers; nothing here names the shell.
//!
//! - [`keys`]: the identities the rules and the index share (resource, workload and its kind, rollout state), and a
//!   kind's facts as plain data.
//! - [`configured_kinds`]: workload kinds added by `--workload-kind`, registered once at startup.
//! - [`resource`]: the ConfigMap/Secret/SecretProviderClass kinds and the env var names derived from them.
//! - [`values`]: single annotation values (Go booleans) and the problem reported for a wrong one.
//! - [`duration`]: Go `time.ParseDuration` syntax.
//! - [`selector`]: label selectors from the command line, normalised and validated.
//! - [`hash`]: content hashes, byte-identical to upstream.
//! - [`keyprints`]: per-key fingerprints, to say which keys changed.
//! - [`csi`]: a SecretProviderClass's hash from its pods' mount statuses.
//! - [`references`]: what a pod spec uses, and the container the env-vars strategy writes to.
//! - [`annotations`]: annotation keys and the values a workload's reload decisions need.
//! - [`decision`]: should this workload reload for this resource, and why.
//! - [`window`]: the reload-window annotation: when reloads may happen.
//! - [`gates`]: whether a wanted reload may be written now or waits (failed rollout, wave, window).
//! - [`strategy`]: how a reload is written into a pod template, and how its hashes are read back.
//! - [`pause`]: the pause-period annotation: when to pause and resume a Deployment.
//! - [`pod_restarts`]: the `evict-pods`/`delete-pods` strategies: which pod to restart next, or wait.
//! - [`record_refusals`]: where the `applied-hashes` record may not be patched, and for how long.

pub mod annotations;
pub mod configured_kinds;
pub mod csi;
pub mod decision;
pub mod duration;
pub mod gates;
pub mod hash;
pub mod keyprints;
pub mod keys;
pub mod pause;
pub mod pod_restarts;
pub mod record_refusals;
pub mod references;
pub mod resource;
pub mod selector;
pub mod strategy;
pub mod values;
pub mod window;
