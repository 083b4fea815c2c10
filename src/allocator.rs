//! The allocator, sized for a controller: freed list buffers go back to the system.
//!
//! **glibc** (the release build) serves allocations of 128 KiB and more with their own `mmap` — until the first one
//! is freed: then it raises that threshold to the freed size (up to 32 MiB) and serves the next ones from its heap.
//! The initial lists' pages (hundreds of KiB of JSON each) then land in the heap between the index entries decoded
//! from them, and the holes they leave are never returned (issue 15: ~4 MiB of M1's 24 MiB after sync). A fixed
//! threshold keeps big buffers out of the heap. Measured at M1 (`bench`, bench/results/HISTORY.md): RSS after sync
//! 24.5–24.9 → 20.3 MiB, peak 24.5–24.9 → 22.1–22.2 MiB.
//!
//! **The static musl build** (the image's binary) allocates with mimalloc instead of musl's own allocator, which
//! cost 27–41% more CPU than glibc at M1 and M2 (issue 40). mimalloc's defaults keep freed memory committed a while
//! and commit whole segments up front (+38% RSS at M1); purging at once and committing on demand bring RSS back to
//! glibc's (BENCHMARKS.md, *The image's binary*).
//!
//! Both read their tunables only from the environment (setting them in code would need `unsafe`), so the controller
//! re-executes itself once with them set. Once only: the re-executed process carries [`REEXEC_MARK`], because glibc
//! removes `GLIBC_TUNABLES` from the environment of a secure-mode process (setuid, file capabilities) and the check
//! alone would loop forever. A variable the user set is kept as it is. Commands that exit at once (`explain`,
//! `--help`, `--version`) are not worth an exec.

use std::ffi::OsString;

/// glibc's tunables: big buffers (≥ 64 KiB) in their own mappings, the heap's free top returned past 64 KiB, and no
/// 128 KiB of padding kept each time the heap grows.
pub const TUNABLES: &str = "glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=65536:glibc.malloc.top_pad=0";
/// glibc's tunables variable.
pub const TUNABLES_VAR: &str = "GLIBC_TUNABLES";
/// mimalloc's tunables (each its own variable): freed memory purged at once instead of 10 ms later, and segments
/// and arenas committed page by page as used instead of whole.
pub const MIMALLOC_TUNABLES: [(&str, &str); 3] =
    [("MIMALLOC_PURGE_DELAY", "0"), ("MIMALLOC_EAGER_COMMIT", "0"), ("MIMALLOC_ARENA_EAGER_COMMIT", "0")];

/// The static musl build allocates with mimalloc: musl's own allocator costs a third more CPU (module header).
#[cfg(target_env = "musl")]
#[global_allocator]
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The tunables of the allocator this binary was built with.
fn tunables() -> &'static [(&'static str, &'static str)] {
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        &[(TUNABLES_VAR, TUNABLES)]
    } else if cfg!(target_env = "musl") {
        &MIMALLOC_TUNABLES
    } else {
        &[]
    }
}

/// Set in the environment of the re-executed process: it never re-executes again.
pub const REEXEC_MARK: &str = "RELOADER_ALLOCATOR_REEXEC";

/// Arguments after which the binary exits without running the controller.
const SHORT_LIVED: [&str; 5] = ["explain", "--help", "-h", "--version", "-V"];

/// Of `tunables`, the variables to re-execute with: those the environment does not set already (the user's own are
/// kept as they are); none when this process is the re-executed one or the command exits at once.
pub fn tunables_to_set(
    tunables: &[(&'static str, &'static str)],
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    args: impl IntoIterator<Item = OsString>,
) -> Vec<(&'static str, &'static str)> {
    let set: Vec<OsString> = vars.into_iter().map(|(name, _)| name).collect();
    let short_lived = args.into_iter().skip(1).any(|a| SHORT_LIVED.iter().any(|s| a == *s));
    if short_lived || set.iter().any(|name| name == REEXEC_MARK) {
        return Vec::new();
    }
    tunables.iter().filter(|(name, _)| !set.iter().any(|s| s == name)).copied().collect()
}

/// Re-executes this binary with its allocator's tunables when some are not set; returns only when it did not
/// (all set, no tunables for this build, or the exec failed — then the process runs on with the allocator's
/// defaults and the reason is returned for the log).
pub fn reexec_with_tunables() -> Option<String> {
    let missing = tunables_to_set(tunables(), std::env::vars_os(), std::env::args_os());
    if missing.is_empty() {
        return None;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Some(format!("allocator tunables not applied: this binary's path is unknown: {e}")),
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        std::os::unix::process::CommandExt::arg0(&mut command, arg0);
    }
    command.args(args).envs(missing).env(REEXEC_MARK, "1");
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

    const GLIBC: &[(&str, &str)] = &[(TUNABLES_VAR, TUNABLES)];

    #[test]
    fn sets_the_tunables_when_the_environment_has_none() {
        let run = args(&["reloader", "--namespaces-to-ignore=kube-system"]);
        assert_eq!(tunables_to_set(GLIBC, vars(&["HOME", "MALLOC_ARENA_MAX"]), run), GLIBC);
        assert_eq!(tunables_to_set(&MIMALLOC_TUNABLES, vars(&["HOME"]), args(&["reloader"])), MIMALLOC_TUNABLES);
    }

    #[test]
    fn keeps_what_the_user_or_the_previous_exec_set() {
        assert_eq!(tunables_to_set(GLIBC, vars(&["HOME", "GLIBC_TUNABLES"]), args(&["reloader"])), []);
        // mimalloc's are one variable each: the user's own is kept, the others are set.
        let user = vars(&["HOME", "MIMALLOC_PURGE_DELAY"]);
        assert_eq!(
            tunables_to_set(&MIMALLOC_TUNABLES, user, args(&["reloader"])),
            [("MIMALLOC_EAGER_COMMIT", "0"), ("MIMALLOC_ARENA_EAGER_COMMIT", "0")]
        );
    }

    #[test]
    fn never_re_executes_twice_even_when_glibc_dropped_the_tunables() {
        // Secure mode: glibc removed GLIBC_TUNABLES, the mark survives.
        assert_eq!(tunables_to_set(GLIBC, vars(&["HOME", REEXEC_MARK]), args(&["reloader"])), []);
        assert_eq!(tunables_to_set(&MIMALLOC_TUNABLES, vars(&[REEXEC_MARK]), args(&["reloader"])), []);
    }

    #[test]
    fn commands_that_exit_at_once_are_not_re_executed() {
        for command in [&["reloader", "--version"][..], &["reloader", "-h"], &["reloader", "explain", "deploy/x"]] {
            assert_eq!(tunables_to_set(GLIBC, vars(&["HOME"]), args(command)), [], "{command:?}");
        }
    }
}
