#!/bin/bash
# M2N with --enable-ha and a lease poller: the longest time the leader's renewTime stood still.
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
out=${OUT:-target/bench/m2n-ha}
mkdir -p "$out"
rm -f target/testenv/bench/kubeconfig
( while [ ! -s target/testenv/bench/kubeconfig ]; do sleep 1; done; sleep 5
  KUBECONFIG=target/testenv/bench/kubeconfig exec python3 "$here/leasepoll.py" > "$out/lease.json" ) &
POLLER=$!
POD_NAME=bench-ha POD_NAMESPACE=default timeout 1200 target/release/bench --no-rollouts --scenarios M2N --duration 10s --settle-timeout 300s \
  --controller-cmd "target/release/reloader --enable-ha --coalesce-window=0s --kube-api-qps=0 --metrics-addr=127.0.0.1:0" \
  --controller-label ha --out "$out" > "$out/bench.log" 2>&1
echo "bench rc=$?"
pkill -TERM -f leasepoll.py; sleep 1; cat "$out/lease.json"
