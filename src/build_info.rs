//! What this binary is: its release version (Cargo.toml) and the commit it was built from
//! (build.rs: from the environment or git; `unknown` and upstream's zero time when neither knows). Shown by
//! `--version` and published in the meta-info ConfigMap's `buildInfo`, as upstream's ldflags do.

/// The release version, e.g. `0.1.0`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The full hash of the commit built, or `unknown`.
pub const COMMIT: &str = env!("RELOADER_BUILD_COMMIT");

/// The commit's time in RFC 3339 (UTC), or `0001-01-01T00:00:00Z`.
pub const COMMIT_TIME: &str = env!("RELOADER_BUILD_COMMIT_TIME");

/// `--version`'s text after the program name: `0.1.0 (commit <hash>, <time>)`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RELOADER_BUILD_COMMIT"),
    ", ",
    env!("RELOADER_BUILD_COMMIT_TIME"),
    ")"
);
