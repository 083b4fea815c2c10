//! glibc's allocator, sized for a controller: freed list buffers go back to the system.
//!
//! glibc serves allocations of 128 KiB and more with their own `mmap` — until the first one is freed: then it
//! raises that threshold to the freed size (up to 32 MiB) and serves the next ones from its heap. The initial
//! lists' pages (hundreds of KiB of JSON each) then land in the heap between the index entries decoded from
//! them, and the holes they leave are never returned (issue 15: ~4 MiB of M1's 24 MiB after sync). A fixed
//! threshold keeps big buffers out of the heap. glibc reads it only from the environment at process start
//! (`mallopt` would need `unsafe`), so the controller re-executes itself once with `GLIBC_TUNABLES` set.
//! Once only: the re-executed process carries [`REEXEC_MARK`], because glibc removes `GLIBC_TUNABLES` from the
//! environment of a secure-mode process (setuid, file capabilities) and the check alone would loop forever.
//! Commands that exit at once (`explain`, `--help`, `--version`) are not worth an exec.
//! Measured at M1 (`bench`, bench/results/HISTORY.md): RSS after sync 24.5–24.9 → 20.3 MiB, peak 24.5–24.9 →
//! 22.1–22.2 MiB.

use std::ffi::OsString;

/// The tunables: big buffers (≥ 64 KiB) in their own mappings, the heap's free top returned past 64 KiB, and no
/// 128 KiB of padding kept each time the heap grows.
pub const TUNABLES: &str = "glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=65536:glibc.malloc.top_pad=0";
/// glibc's tunables variable.
pub const TUNABLES_VAR: &str = "GLIBC_TUNABLES";

/// Set in the environment of the re-executed process: it never re-executes again.
pub const REEXEC_MARK: &str = "RELOADER_ALLOCATOR_REEXEC";

/// Arguments after which the binary exits without running the controller.
const SHORT_LIVED: [&str; 5] = ["explain", "--help", "-h", "--version", "-V"];

/// The `GLIBC_TUNABLES` value to re-execute with, or `None` when the environment has one already (the user's
/// own, kept whole), when this process is the re-executed one, or when the command exits at once.
pub fn tunables_to_set(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    args: impl IntoIterator<Item = OsString>,
) -> Option<&'static str> {
    let set = vars.into_iter().any(|(name, _)| name == TUNABLES_VAR || name == REEXEC_MARK);
    let short_lived = args.into_iter().skip(1).any(|a| SHORT_LIVED.iter().any(|s| a == *s));
    (!set && !short_lived).then_some(TUNABLES)
}

/// Re-executes this binary with [`TUNABLES`] when glibc is the allocator and nothing set them; returns only when
/// it did not (already set, not glibc, or the exec failed — then the process runs on with glibc's defaults and
/// the reason is returned for the log).
pub fn reexec_with_tunables() -> Option<String> {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return None;
    }
    let value = tunables_to_set(std::env::vars_os(), std::env::args_os())?;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Some(format!("allocator tunables not applied: this binary's path is unknown: {e}")),
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        std::os::unix::process::CommandExt::arg0(&mut command, arg0);
    }
    command.args(args).env(TUNABLES_VAR, value).env(REEXEC_MARK, "1");
    let error = std::os::unix::process::CommandExt::exec(&mut command);
    Some(format!("allocator tunables not applied: re-executing failed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(OsString, OsString)> {
        names.iter().map(|n| (OsString::from(n), OsString::from("1"))).collect()
    }

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn sets_the_tunables_when_the_environment_has_none() {
        let run = args(&["reloader", "--namespaces-to-ignore=kube-system"]);
        assert_eq!(tunables_to_set(vars(&["HOME", "MALLOC_ARENA_MAX"]), run), Some(TUNABLES));
    }

    #[test]
    fn keeps_what_the_user_or_the_previous_exec_set() {
        assert_eq!(tunables_to_set(vars(&["HOME", "GLIBC_TUNABLES"]), args(&["reloader"])), None);
    }

    #[test]
    fn never_re_executes_twice_even_when_glibc_dropped_the_tunables() {
        // Secure mode: glibc removed GLIBC_TUNABLES, the mark survives.
        assert_eq!(tunables_to_set(vars(&["HOME", REEXEC_MARK]), args(&["reloader"])), None);
    }

    #[test]
    fn commands_that_exit_at_once_are_not_re_executed() {
        for command in [&["reloader", "--version"][..], &["reloader", "-h"], &["reloader", "explain", "deploy/x"]] {
            assert_eq!(tunables_to_set(vars(&["HOME"]), args(command)), None, "{command:?}");
        }
    }
}
