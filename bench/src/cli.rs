//! Command-line helpers shared by the `bench`, `chaos` and `soak` binaries.

use std::{future::Future, path::PathBuf, process::ExitCode, time::Duration};

/// Runs a tool's `main_async` on the tools' runtime: exit status 0 when it reports success, 1 when it ran but
/// found a failure (a missed reload, a run not clean), and the error printed with status 1 otherwise.
pub fn run_tool<F: Future<Output = anyhow::Result<bool>>>(name: &str, main: F) -> ExitCode {
    let Some(rt) = testenv::tool_runtime(name) else { return ExitCode::FAILURE };
    match rt.block_on(main) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("{name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Parses `10s`, `500ms`, `2m` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((t, "s"), |i| t.split_at(i));
    let n: f64 = num.parse().map_err(|_| format!("not a duration: {text}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("unknown unit in {text} (use ms, s or m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{text}: {e}"))
}

/// `<workspace>/target`, or `CARGO_TARGET_DIR`.
pub fn workspace_target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        crate_dir.parent().map(|root| root.join("target")).unwrap_or(crate_dir)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("3h").is_err());
        assert!(parse_duration("abc").is_err());
    }
}
