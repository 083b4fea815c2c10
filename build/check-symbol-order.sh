#!/bin/sh
# Checks that a code layout list still names a release binary's functions (build.rs places them first; an idle
# controller's memory depends on it, BENCHMARKS.md): build/symbol-order.txt for the glibc build, by default, or the
# list given after the binary (build/symbol-order-musl.txt for the image's, build/layer.sh). Editing code keeps the
# names. A new Rust toolchain, or any change to the crate's dependencies (one added, a version updated), renames
# many: generic code compiled into this crate is named with a hash of its build, which cargo derives from its
# dependencies. Then the list only loses its gain (idle memory), nothing breaks: by default this warns; with
# --strict (the benchmark and release targets, whose figures depend on it) it fails until `build/symbol-order.sh`
# regenerates the list.
set -eu
cd "$(dirname "$0")/.."
strict=false
if [ "${1:-}" = --strict ]; then strict=true; shift; fi
binary=${1:-target/release/reloader}
list=${2:-build/symbol-order.txt}
# The list is used only where build.rs uses it.
if [ "${RELOADER_SYMBOL_ORDER:-}" = off ] || [ "$(uname -m)" != x86_64 ]; then exit 0; fi
case $list in *musl*) regenerate="build/symbol-order.sh musl";; *) regenerate=build/symbol-order.sh;; esac
[ -f "$list" ] || { echo "$list is missing; generate it with $regenerate" >&2; if $strict; then exit 1; fi; exit 0; }
listed=$(wc -l < "$list")
found=$(${NM:-nm} --defined-only "$binary" | awk 'NR == FNR { listed[$1] = 1; next } ($NF in listed) && !seen[$NF]++ { found++ } END { print found + 0 }' "$list" -)
# Every function is found right after regenerating; edits to our code rename or inline a few.
if [ $((found * 100)) -lt $((listed * 85)) ]; then
  echo "$list: only $found of its $listed functions are in $binary; regenerate it with $regenerate" >&2
  if $strict; then exit 1; fi
  echo "warning: the release binary works, but an idle controller uses more memory until the list is regenerated" >&2
  exit 0
fi
echo "$list: $found of $listed functions found in $binary"
