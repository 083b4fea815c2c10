#!/bin/sh
# Regenerates build/symbol-order.txt, the functions the release binary places first (see build.rs): runs the
# benchmark scenarios S1–S13 on a local control plane with the controller under callgrind, and lists every
# function of the binary that ran, the most executed first. About 5 minutes once built; needs valgrind.
#
# Rerun it when `make release-binary` reports that the list no longer matches the binary (a new Rust toolchain or a
# change to the crate's dependencies renames many symbols; see build/check-symbol-order.sh).
set -eu
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "symbol-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release -p reloader -p bench --bins
binary="$PWD/target/release/reloader"
out="$PWD/target/symbol-order"
rm -rf "$out" && mkdir -p "$out"
# GLIBC_TUNABLES set: the controller does not re-execute itself to set its allocator tunables (src/allocator.rs),
# so callgrind profiles one process. The value is the one the controller sets itself.
tunables="glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=65536:glibc.malloc.top_pad=0"
target/release/bench --no-rollouts --scenarios S1,S2,S3,S4,S5,S6,S7,S8,S9,S10,S11,S12,S13 --duration 5s \
  --settle-timeout 60s --out "$out/bench" \
  --controller-cmd "env GLIBC_TUNABLES=$tunables valgrind --tool=callgrind --callgrind-out-file=$out/callgrind.%p.out \
--demangle=no --compress-strings=no --compress-pos=no $binary --coalesce-window=0s --metrics-addr=127.0.0.1:0"
# Callgrind's format: `ob=` names the object of the `fn=` blocks that follow; a block's cost lines are
# "<line> <instructions>", except the line after `calls=`, which is the callee's inclusive cost. Callgrind
# marks recursion levels with a suffix ('2) and names code without a symbol by address (0x…) or in parentheses.
awk -v binary="$binary" '
  /^ob=/ { object = substr($0, 4); next }
  /^fn=/ {
    function_name = substr($0, 4)
    sub(/\047[0-9]+$/, "", function_name)
    named = object == binary && function_name !~ /^(0x|\()/
    if (named) cost[function_name] += 0
    next
  }
  /^calls=/ { skip_next = 1; next }
  /^[0-9]/ {
    if (skip_next) { skip_next = 0; next }
    if (named) cost[function_name] += $2
  }
  END { for (name in cost) print cost[name], name }
' "$out"/callgrind.*.out | sort -k1,1nr -k2,2 | cut -d' ' -f2 > build/symbol-order.txt
echo "build/symbol-order.txt: $(wc -l < build/symbol-order.txt) functions"
