//! Finds or builds the control-plane binaries with `testenv/build.sh` (pinned versions in `versions.env`,
//! cache under `~/.cache/reloader-rs/testenv`). The script's progress goes to stderr; its last stdout line is
//! the bin folder.

use std::{path::PathBuf, process::Stdio};

use crate::Error;

/// The build script, next to this crate's manifest.
pub fn build_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("build.sh")
}

/// Runs the build script (a no-op when every binary is cached) and returns the bin folder.
pub fn ensure_built() -> Result<PathBuf, Error> {
    let script = build_script();
    let out = std::process::Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| Error::Spawn { program: script.clone(), source })?;
    if !out.status.success() {
        return Err(Error::Build { status: out.status.to_string() });
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or_default().trim();
    Ok(PathBuf::from(dir))
}
