//! Lays out the release binary's code so that what a running controller executes sits together.
//!
//! An idle controller's memory is mostly its own code: the kernel maps a binary's text in 64 KiB blocks around
//! each page first used (fault-around), so code used at startup and on each reload, scattered over 8.5 MB of
//! `.text`, makes nearly all of it resident. `build/symbol-order.txt` lists the functions the controller runs in
//! the benchmark scenarios (measured with callgrind, `build/symbol-order.sh`); the linker places them first and
//! the rest after them, where they stay on disk. S1 RSS 7.8 MiB instead of 11.8 (BENCHMARKS.md, *Code layout*).
//!
//! Only for the release profile on x86_64 Linux, whose default linker (rust-lld since Rust 1.90) knows
//! `--symbol-ordering-file`. A build with another linker sets `RELOADER_SYMBOL_ORDER=off`. A stale list only
//! loses the gain: unknown names are skipped. Editing code keeps the names; changing the crate's dependencies
//! or the toolchain renames many (`make release` checks how many still match).

use std::env;
use std::path::Path;

const ORDER_FILE: &str = "build/symbol-order.txt";
const OPT_OUT_VAR: &str = "RELOADER_SYMBOL_ORDER";

fn main() {
    println!("cargo::rerun-if-changed={ORDER_FILE}");
    println!("cargo::rerun-if-env-changed={OPT_OUT_VAR}");
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let lld_target = env::var("TARGET").is_ok_and(|target| target == "x86_64-unknown-linux-gnu");
    let opted_out = env::var(OPT_OUT_VAR).is_ok_and(|value| value == "off");
    if !release || !lld_target || opted_out {
        return;
    }
    let manifest_dir = env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let order_file = Path::new(&manifest_dir).join(ORDER_FILE);
    if !order_file.is_file() {
        return;
    }
    let order_file = order_file.display();
    println!("cargo::rustc-link-arg-bin=reloader=-Wl,--symbol-ordering-file={order_file}");
    println!("cargo::rustc-link-arg-bin=reloader=-Wl,--no-warn-symbol-ordering");
}
