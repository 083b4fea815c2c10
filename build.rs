//! Two build-time facts for the binary:
//!
//! **Which commit it was built from** (`--version`, the meta-info ConfigMap's `buildInfo`, the image's labels):
//! `RELOADER_BUILD_COMMIT` / `RELOADER_BUILD_COMMIT_TIME` from the environment when set (a build without `.git`,
//! e.g. a container build context), else asked from git; without either, `unknown` and upstream's zero time.
//! Cargo re-runs this when HEAD or the branch it names moves, so a commit rebuilds the crate once.
//!
//! **Where its code sits.** Lays out the release binary's code so that what a running controller executes sits
//! together.
//!
//! An idle controller's memory is mostly its own code: the kernel maps a binary's text in 64 KiB blocks around
//! each page first used (fault-around), so code used at startup and on each reload, scattered over 8.5 MB of
//! `.text`, makes nearly all of it resident. `build/symbol-order.txt` lists the functions the controller runs in
//! the benchmark scenarios (measured with callgrind, `build/symbol-order.sh`); the linker places them first and
//! the rest after them, where they stay on disk. S1 RSS 7.8 MiB instead of 11.8 (bench/results/HISTORY.md, *Code
//! layout*).
//!
//! Only for release builds on x86_64 Linux linked by lld: the glibc build (`make release-binary`; rust-lld is
//! Rust's default linker there since 1.90) and the image's static musl build (`build/layer.sh` links with
//! `clang -fuse-ld=lld`). Each has its own list, `build/symbol-order-musl.txt` for the musl one: function names
//! carry a hash of the build (the target, the dependencies' features), so one list cannot name both. A build with
//! another linker sets `RELOADER_SYMBOL_ORDER=off`. A stale list only loses the gain: unknown names are skipped.
//! Editing code keeps the names; changing the crate's dependencies or the toolchain renames many (`make
//! release-binary` and `build/layer.sh` check how many still match).

use std::env;
use std::path::Path;
use std::process::Command;

/// The code layout list of each target it is used for (see the module comment).
const ORDER_FILES: [(&str, &str); 2] = [
    ("x86_64-unknown-linux-gnu", "build/symbol-order.txt"),
    ("x86_64-unknown-linux-musl", "build/symbol-order-musl.txt"),
];
const OPT_OUT_VAR: &str = "RELOADER_SYMBOL_ORDER";

/// What `buildInfo` says when the commit is not known (upstream's values for a build without ldflags).
const UNKNOWN_COMMIT: (&str, &str) = ("unknown", "0001-01-01T00:00:00Z");

fn main() {
    build_commit();
    symbol_order();
}

/// `git <args>` in the crate's directory, its trimmed output when it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let dir = env::var("CARGO_MANIFEST_DIR").ok()?;
    let output = Command::new("git").args(args).current_dir(dir).env("TZ", "UTC").output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn build_commit() {
    const COMMIT_VAR: &str = "RELOADER_BUILD_COMMIT";
    const TIME_VAR: &str = "RELOADER_BUILD_COMMIT_TIME";
    println!("cargo::rerun-if-env-changed={COMMIT_VAR}");
    println!("cargo::rerun-if-env-changed={TIME_VAR}");
    let (commit, time) = match env::var(COMMIT_VAR) {
        Ok(commit) if !commit.is_empty() => (commit, env::var(TIME_VAR).unwrap_or(UNKNOWN_COMMIT.1.to_owned())),
        _ => from_git().unwrap_or((UNKNOWN_COMMIT.0.to_owned(), UNKNOWN_COMMIT.1.to_owned())),
    };
    println!("cargo::rustc-env={COMMIT_VAR}={commit}");
    println!("cargo::rustc-env={TIME_VAR}={time}");
}

/// HEAD's hash and commit time (RFC 3339, UTC), watching the files that change when HEAD moves. Only files
/// that exist are watched: Cargo re-runs a script whose watched file is missing on every build.
fn from_git() -> Option<(String, String)> {
    let commit = git(&["rev-parse", "HEAD"])?;
    let time = git(&["show", "-s", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "HEAD"])?;
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", name])
            && Path::new(&path).exists()
        {
            println!("cargo::rerun-if-changed={path}");
        }
    }
    Some((commit, time))
}

/// The release binary's code layout (see the module comment).
fn symbol_order() {
    println!("cargo::rerun-if-env-changed={OPT_OUT_VAR}");
    let target = env::var("TARGET").unwrap_or_default();
    let Some((_, list)) = ORDER_FILES.iter().find(|(lld_target, _)| *lld_target == target) else {
        return;
    };
    println!("cargo::rerun-if-changed={list}");
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let opted_out = env::var(OPT_OUT_VAR).is_ok_and(|value| value == "off");
    if !release || opted_out {
        return;
    }
    let manifest_dir = env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let order_file = Path::new(&manifest_dir).join(list);
    if !order_file.is_file() {
        return;
    }
    let order_file = order_file.display();
    println!("cargo::rustc-link-arg-bin=reloader=-Wl,--symbol-ordering-file={order_file}");
    println!("cargo::rustc-link-arg-bin=reloader=-Wl,--no-warn-symbol-ordering");
}
