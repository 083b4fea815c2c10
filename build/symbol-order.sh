#!/bin/sh
# Regenerates a code layout list, the functions a release binary places first (see build.rs): runs the benchmark
# scenarios S1–S13 on a local control plane with the controller under callgrind, and lists every function of the
# binary that ran, the most executed first. About 7 minutes once built; needs valgrind.
#
#   build/symbol-order.sh        build/symbol-order.txt, for the glibc build (target/release/reloader)
#   build/symbol-order.sh musl   build/symbol-order-musl.txt, for the image's amd64 binary (build/layer.sh)
#
# Rerun it when `make release-binary` or build/layer.sh reports that a list no longer matches its binary (a new Rust
# toolchain or a change to the crate's dependencies renames many symbols; see build/check-symbol-order.sh).
set -eu
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "symbol-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release -p reloader -p bench --bins
out="$PWD/target/symbol-order"
rm -rf "$out" && mkdir -p "$out"
case ${1:-gnu} in
  gnu) binary="$PWD/target/release/reloader" list=build/symbol-order.txt;;
  musl)
    build/layer.sh amd64 "$out/layer" >/dev/null
    binary="$PWD/target/x86_64-unknown-linux-musl/release/reloader" list=build/symbol-order-musl.txt;;
  *) echo "usage: build/symbol-order.sh [gnu|musl]" >&2; exit 2;;
esac
# --trace-children: the controller re-executes itself once to set its allocator's tunables (src/allocator.rs);
# callgrind follows it into the new image, which writes the profile (same process id, same file).
target/release/bench --no-rollouts --scenarios S1,S2,S3,S4,S5,S6,S7,S8,S9,S10,S11,S12,S13 --duration 5s \
  --settle-timeout 60s --out "$out/bench" \
  --controller-cmd "valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=$out/callgrind.%p.out \
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
' "$out"/callgrind.*.out | sort -k1,1nr -k2,2 | cut -d' ' -f2 > "$list"
echo "$list: $(wc -l < "$list") functions"
