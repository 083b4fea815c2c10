#!/usr/bin/env bash
# M2 against another M2-sized scenario (M2N by default, or M2R), each run on a control plane of its own
# (--fresh-plane), the order alternating, RUNS times: run.sh [SCENARIO] [RUNS]. Reports go to
# target/<scenario>-fresh/run-<i>/ (summarize.py reads them).
set -u
other=${1:-M2N}
runs=${2:-8}
out=target/$(echo "$other" | tr 'A-Z' 'a-z')-fresh
cd "$(dirname "$0")/../../.."  # the repository root
mkdir -p "$out"
for i in $(seq "$runs"); do
  if [ $((i % 2)) = 1 ]; then order=M2,$other; else order=$other,M2; fi
  target/release/bench --no-rollouts --fresh-plane --scenarios "$order" --duration 10s --settle-timeout 300s \
    --controller-cmd "target/release/reloader --coalesce-window=0s --kube-api-qps=0 --metrics-addr=127.0.0.1:0" \
    --controller-label ours --out "$out/run-$i" > "$out/run-$i.log" 2>&1
  echo "run $i ($order) rc=$?" >> "$out/done.log"
done
