#!/usr/bin/env bash
# M2 against M2R (named lists of regular expressions), each scenario on a control plane of its own (--fresh-plane), order alternating.
set -u
cd "$(dirname "$0")/../../.."  # the repository root
for i in 1 2 3 4; do
  if [ $((i % 2)) = 1 ]; then order=M2,M2R; else order=M2R,M2; fi
  target/release/bench --no-rollouts --fresh-plane --scenarios $order --duration 10s --settle-timeout 300s \
    --controller-cmd "target/release/reloader --coalesce-window=0s --kube-api-qps=0 --metrics-addr=127.0.0.1:0" \
    --controller-label ours --out target/m2r-fresh/run-$i > target/m2r-fresh/run-$i.log 2>&1
  echo "run $i ($order) rc=$?" >> target/m2r-fresh/done.log
done
