#!/usr/bin/env bash
# Builds the test control plane from the Go module proxy: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3) and kwok; and the tools the
# tests run besides it: helm, promtool, actionlint.
# Idempotent: a binary whose --version already matches the pin is kept.
# Usage: testenv/build.sh            -> prints the bin directory on its last line
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$HERE/versions.env"
CACHE=${TESTENV_CACHE:-$HOME/.cache/reloader-rs/testenv}
BIN=$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION/bin
SRC=$CACHE/src
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

say() { printf '[testenv/build] %s\n' "$*" >&2; }
die() { printf '[testenv/build] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "Go is not installed. Install Go >= 1.26 (https://go.dev/dl) and make sure 'go' is on PATH."
command -v python3 >/dev/null || die "python3 is required to read 'go mod download -json' output."
mkdir -p "$BIN" "$SRC"

# has BINARY EXPECTED-SUBSTRING [version args...]
# (The output is captured first: `cmd | grep -q` under pipefail fails when grep exits before cmd finishes.)
has() {
  local b=$BIN/$1 want=$2 out; shift 2
  [ -x "$b" ] || return 1
  out=$("$b" "$@" 2>&1) || return 1
  case "$out" in *"$want"*) return 0;; *) return 1;; esac
}

fetch() { # module@version -> JSON, with a message naming the module if the proxy refuses it
  go mod download -json "$1" 2>"$SRC/fetch.err" || die "cannot fetch Go module $1 from $(go env GOPROXY): $(tail -3 "$SRC/fetch.err"). Check GOPROXY/network, or pin a version the proxy has in testenv/versions.env."
}

build_k8s() {
  if has kube-apiserver "$K8S_VERSION" --version && has kube-controller-manager "$K8S_VERSION" --version \
     && has kube-scheduler "$K8S_VERSION" --version && has kubectl "$K8S_VERSION" version --client; then
    say "kubernetes $K8S_VERSION: cached"; return; fi
  say "kubernetes $K8S_VERSION: building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (cold: ~15-30 min on 2 cores)"
  local w=$SRC/k8s-$K8S_VERSION; mkdir -p "$w"; cd "$w"
  rm -f go.mod go.sum; go mod init local/testenv-k8s >/dev/null 2>&1
  local json up_gomod up_commit staging mods minor ldf date
  json=$(fetch "k8s.io/kubernetes@$K8S_VERSION")
  up_gomod=$(printf '%s' "$json" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  up_commit=$(printf '%s' "$json" | python3 -c 'import json,sys;print((json.load(sys.stdin).get("Origin") or {}).get("Hash") or "unknown")')
  staging="v0.${K8S_VERSION#v1.}"
  # One replace per staging module (upstream requires them at v0.0.0 and maps them to ./staging).
  mods=$( { awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$up_gomod"
            awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$up_gomod"
            awk '$1 == "replace" && $3 == "=>" && $4 ~ /^\.\/staging\// {print $2}' "$up_gomod"; } | sort -u)
  say "staging modules: $(echo "$mods" | wc -w)"
  for m in $mods; do go mod edit -replace="$m=$m@$staging"; done
  go mod edit -go="$(awk '$1=="go"{print $2; exit}' "$up_gomod")"
  local gd; gd=$(awk '$1=="godebug" && $2 != "(" {print $2; exit}' "$up_gomod")
  if [ -n "$gd" ]; then go mod edit -godebug="$gd"; fi
  say "resolving modules (downloads ~1 GB the first time)"
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" \
    || die "go get of k8s.io/kubernetes@$K8S_VERSION failed (see above)"
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  case "$K8S_VERSION" in *-*) minor="$minor+";; esac
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  ldf="-s -w"
  # Version ldflags as upstream hack/lib/version.sh, so /version reports the real version (helm kubeVersion checks).
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf="$ldf -X $p.gitCommit=$up_commit -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  local cmd
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    say "compiling $cmd"
    go build -trimpath -tags=selinux,notest -ldflags="$ldf" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  done
  "$BIN/kube-apiserver" --version >&2
}

build_etcd() {
  if has etcd "${ETCD_VERSION#v}" --version; then say "etcd $ETCD_VERSION: cached"; return; fi
  say "etcd $ETCD_VERSION: building (~2 min)"
  local w=$SRC/etcd-$ETCD_VERSION; mkdir -p "$w"; cd "$w"
  rm -f go.mod go.sum; go mod init local/testenv-etcd >/dev/null 2>&1
  fetch "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" || die "go get go.etcd.io/etcd/server/v3@$ETCD_VERSION failed"
  go build -trimpath -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  "$BIN/etcd" --version >&2
}

# Pods created from a template the controller reloaded never become Ready when they carry this label: with an
# empty value after any reload, with a hash as value only when reloaded with that hash (a STAKATER_* env var
# holding it, env-vars strategy, or a reloader.stakater.com/last-reloaded-from annotation containing it). The
# health-gate tests need a rollout that cannot progress (ProgressDeadlineExceeded) for one content only, so that
# the next change rolls out fine. Every other pod goes Ready as the stock stage does.
KWOK_UNREADY_LABEL=testenv.reloader.dev/unready-when-reloaded
# Written into kwok-stages.yaml; bump it when the stage recipe below changes so cached files are regenerated.
KWOK_STAGES_MARK="testenv-stages rev 3: $KWOK_UNREADY_LABEL"

kwok_module_dir() {
  local json
  json=$(fetch "sigs.k8s.io/kwok@$KWOK_VERSION") || exit 1  # (errexit is off inside $(...))
  printf '%s' "$json" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])'
}

# build_kwok_stages MODULE-DIR: writes $BIN/kwok-stages.yaml.
build_kwok_stages() {
  local dir=$1 f tmp=$BIN/kwok-stages.yaml.tmp.$$
  # The "fast" stages shipped in the module: nodes Ready, bound pods Running+Ready, Jobs' pods complete.
  : > "$tmp"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [ -f "$dir/kustomize/stage/$f" ] || { rm -f "$tmp"; die "kwok stage $f not found in sigs.k8s.io/kwok@$KWOK_VERSION"; }
    { cat "$dir/kustomize/stage/$f"; echo '---'; } >> "$tmp"
  done
  # Append one matchExpression to the pod-ready stage. KWOK (pkg/utils/expression) runs the key as a gojq
  # query; a query error yields "no value", which NotIn matches, so a broken rule degrades to "pod goes Ready".
  local key
  key='.metadata.labels["'"$KWOK_UNREADY_LABEL"'"] as $bad | if $bad == null then "go" elif ((.metadata.annotations["reloader.stakater.com/last-reloaded-from"] // null) as $r | $r != null and ($r | contains($bad))) or any(.spec.containers[]?.env[]?; ((.name // "") | startswith("STAKATER_")) and ($bad == "" or .value == $bad)) then "hold" else "go" end'
  MARK=$KWOK_STAGES_MARK KEY=$key python3 - "$tmp" <<'PY' || { rm -f "$tmp"; die "could not add the unready-when-reloaded rule to kwok's pod-ready stage (layout of sigs.k8s.io/kwok@$KWOK_VERSION changed?)"; }
import os, re, sys
path, mark, key = sys.argv[1], os.environ["MARK"], os.environ["KEY"]
docs = open(path).read().split("\n---\n")
hits = [i for i, d in enumerate(docs) if re.search(r"(?m)^kind: Stage$", d) and re.search(r"(?m)^  name: pod-ready$", d)]
if len(hits) != 1:
    sys.exit(f"expected exactly one 'pod-ready' Stage, found {len(hits)}")
lines = docs[hits[0]].split("\n")
try:
    sel = lines.index("  selector:")
    at = lines.index("    matchExpressions:", sel)
except ValueError:
    sys.exit("pod-ready stage has no 'spec.selector.matchExpressions' at the expected indentation")
end = at + 1  # end of the list: first line that is neither a "    - " item nor indented deeper
while end < len(lines) and (lines[end].startswith("    - ") or lines[end].startswith("      ")):
    end += 1
if end == at + 1 or "'" in key:
    sys.exit("unexpected matchExpressions layout or quote in the key")
rule = [f"    # {mark}", f"    - key: '{key}'", "      operator: 'NotIn'", "      values:", "      - 'hold'"]
lines[end:end] = rule
docs[hits[0]] = "\n".join(lines)
open(path, "w").write("\n---\n".join(docs))
PY
  grep -qF "$KWOK_STAGES_MARK" "$tmp" || { rm -f "$tmp"; die "kwok stages: rule marker missing after generation"; }
  mv "$tmp" "$BIN/kwok-stages.yaml"
}

build_kwok() {
  local dir=""
  if has kwok "$KWOK_VERSION" --version; then
    say "kwok $KWOK_VERSION: cached"
  else
    say "kwok $KWOK_VERSION: building (~2 min)"
    dir=$(kwok_module_dir)
    GOBIN="$BIN" go install -trimpath -ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
      "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" || die "go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION failed"
  fi
  # Regenerated (without rebuilding kwok) when missing or written by an older recipe.
  if [ -s "$BIN/kwok-stages.yaml" ] && grep -qF "$KWOK_STAGES_MARK" "$BIN/kwok-stages.yaml"; then
    say "kwok stages: cached"; return; fi
  say "kwok stages: generating $BIN/kwok-stages.yaml"
  [ -n "$dir" ] || dir=$(kwok_module_dir)
  build_kwok_stages "$dir"
}

# go_tool NAME VERSION PACKAGE LDFLAGS VERSION_ARGS...: `go install PACKAGE@VERSION` into $BIN, unless
# `NAME VERSION_ARGS...` already answers VERSION.
go_tool() {
  local name=$1 version=$2 package=$3 ldflags=$4; shift 4
  if has "$name" "$version" "$@"; then say "$name $version: cached"; return; fi
  say "$name $version: building"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w $ldflags" "$package@$version" || die "go install $package@$version failed"
}

# helm (~2 min cold), with the Kubernetes version its lint and capabilities assume set to the control plane's.
build_helm() {
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  go_tool helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
    "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata= \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
    version --short
}

build_etcd
build_kwok
build_k8s
# The tools the tests run besides the control plane (chart renders, alert rules, workflow files).
# promtool ~3.5 min cold, actionlint ~10 s.
if [ "${TESTENV_WITH_HELM:-1}" = 1 ]; then
  build_helm
  go_tool promtool "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool \
    "-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" --version
  go_tool actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint "" --version
fi
say "binaries ready in $BIN"
echo "$BIN"
