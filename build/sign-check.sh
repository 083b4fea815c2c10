#!/usr/bin/env bash
# `make sign-check`: runs the cosign commands of the release workflow (.github/workflows/release.yml, job `sign`)
# and of docs/image.md ("Verifying a release") against a registry on this machine, with a key pair made for the run.
# The workflow signs keylessly (GitHub's OIDC token, Sigstore's certificate authority and transparency log), which
# cannot be reached from here; the commands are otherwise the same, so what this checks is that they fit together:
#
#   the chart   helm package, helm push and helm pull back (the file users verify is the one helm installs);
#               cosign sign-blob --bundle, cosign verify-blob --bundle of the pulled file; a changed chart and
#               another key are refused
#   the image   a small image pushed by crane; cosign sign of its digest, cosign verify of its tag; cosign attest
#               --type spdxjson and cosign verify-attestation; an unsigned image and another key are refused
#
# Beside the key, keeping the signatures out of the public transparency log (a signing config without services;
# --insecure-ignore-tlog to verify) is the only difference. Not part of `make test`: the first run builds cosign
# (build/versions.env: the version the workflow's cosign-installer installs) and crane from the Go module proxy;
# after that it needs no network.
#
# helm: $HELM, else the one `target/debug/testenv build` builds (make testenv-binaries).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=build/versions.env
. build/versions.env
TOOLS=${RELOADER_TOOLS_CACHE:-$HOME/.cache/reloader-rs/tools}
say() { printf '[sign-check] %s\n' "$*" >&2; }
die() { printf '[sign-check] ERROR: %s\n' "$*" >&2; exit 1; }

if [ -z "${HELM:-}" ] && [ -x target/debug/testenv ]; then HELM="$(target/debug/testenv build 2>/dev/null | tail -1)/helm"; fi
[ -x "${HELM:-}" ] || die "helm not found: make testenv-binaries builds it, or set HELM=/path/to/helm"

# shellcheck source=build/go-tool.sh
. build/go-tool.sh
COSIGN=$(go_tool cosign "$COSIGN_VERSION" github.com/sigstore/cosign/v3/cmd/cosign)
CRANE=$(crane_tool)

WORK=$(mktemp -d)
REGISTRY_PID=
cleanup() { [ -z "$REGISTRY_PID" ] || kill "$REGISTRY_PID" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
# cosign, helm and crane keep their logins and caches here, not in the user's home.
export HOME=$WORK/home DOCKER_CONFIG=$WORK/docker HELM_CONFIG_HOME=$WORK/helm HELM_CACHE_HOME=$WORK/helm-cache
export SIGSTORE_NO_CACHE=1 TUF_ROOT=$WORK/tuf

# refused DESCRIPTION COMMAND...: the command must fail (a check that cannot fail proves nothing).
refused() {
  local what=$1; shift
  if "$@" >"$WORK/refused.log" 2>&1; then die "accepted $what: $*"; fi
  say "refused, as it should be: $what ($(grep -m1 '^Error:' "$WORK/refused.log" || tail -1 "$WORK/refused.log"))"
}

# A registry in memory on a free port of 127.0.0.1 (crane's, as build/image.sh uses), stopped on exit.
"$CRANE" registry serve --address 127.0.0.1:0 >"$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
for _ in $(seq 50); do grep -q 'serving on port' "$WORK/registry.log" && break; sleep 0.1; done
PORT=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$WORK/registry.log" | head -1)
[ -n "$PORT" ] || die "crane registry did not start: $(cat "$WORK/registry.log")"
REGISTRY=127.0.0.1:$PORT

# Two key pairs: the release's, and another one whose signatures must not pass for it. Thrown away on exit, so
# without a password (cosign reads it from COSIGN_PASSWORD instead of asking).
export COSIGN_PASSWORD=''
for key in release other; do
  (cd "$WORK" && "$COSIGN" generate-key-pair --output-key-prefix "$key" >/dev/null 2>&1) \
    || die "cosign generate-key-pair failed"
done
# A signing config without services: nothing is sent to a transparency log or timestamp authority.
"$COSIGN" signing-config create --out "$WORK/signing-config.json" >/dev/null
SIGN=(--key "$WORK/release.key" --signing-config "$WORK/signing-config.json" --yes)
VERIFY=(--key "$WORK/release.pub" --insecure-ignore-tlog=true)
OTHER=(--key "$WORK/other.pub" --insecure-ignore-tlog=true)

# The chart, as the workflow signs it and as a user verifies it after `helm pull`.
VERSION=$(awk -F'"' '/^\[package\]/{p=1} p && /^version *=/{print $2; exit}' Cargo.toml)
CHART=reloader-$VERSION.tgz
"$HELM" package deploy/helm/reloader --destination "$WORK/built" >/dev/null
"$HELM" push --plain-http "$WORK/built/$CHART" "oci://$REGISTRY/charts" >/dev/null 2>&1 || die "helm push failed"
mkdir -p "$WORK/pulled"
"$HELM" pull --plain-http "oci://$REGISTRY/charts/reloader" --version "$VERSION" --destination "$WORK/pulled" 2>/dev/null
cmp -s "$WORK/built/$CHART" "$WORK/pulled/$CHART" || die "helm pull gave another file than the packaged chart"
"$COSIGN" sign-blob "${SIGN[@]}" --bundle "$WORK/$CHART.sigstore.json" "$WORK/built/$CHART" >/dev/null 2>&1 \
  || die "cosign sign-blob failed"
"$COSIGN" verify-blob "${VERIFY[@]}" --bundle "$WORK/$CHART.sigstore.json" "$WORK/pulled/$CHART" >/dev/null 2>&1 \
  || die "cosign verify-blob refused the pulled chart"
say "the chart: sign-blob --bundle, verify-blob --bundle of what helm pull gives"
cp "$WORK/pulled/$CHART" "$WORK/changed.tgz" && printf '\0' >>"$WORK/changed.tgz"
refused "a changed chart" "$COSIGN" verify-blob "${VERIFY[@]}" --bundle "$WORK/$CHART.sigstore.json" "$WORK/changed.tgz"
refused "the chart under another key" \
  "$COSIGN" verify-blob "${OTHER[@]}" --bundle "$WORK/$CHART.sigstore.json" "$WORK/pulled/$CHART"

# An image: one small layer, enough for a signature and an attestation (the real one is build/image.sh's).
mkdir -p "$WORK/layer" && echo "sign-check" >"$WORK/layer/hello"
tar -C "$WORK/layer" -cf "$WORK/layer.tar" hello
IMAGE=$REGISTRY/reloader
"$CRANE" append --insecure --oci-empty-base -f "$WORK/layer.tar" -t "$IMAGE:$VERSION" >/dev/null 2>&1
DIGEST=$("$CRANE" digest --insecure "$IMAGE:$VERSION")
"$COSIGN" sign "${SIGN[@]}" "$IMAGE@$DIGEST" >/dev/null 2>&1 || die "cosign sign failed"
"$COSIGN" verify "${VERIFY[@]}" "$IMAGE:$VERSION" >/dev/null 2>&1 || die "cosign verify refused the signed image"
say "the image: sign of its digest, verify of its tag"
echo '{"spdxVersion": "SPDX-2.3", "name": "sign-check"}' >"$WORK/sbom.spdx.json"
"$COSIGN" attest "${SIGN[@]}" --type spdxjson --predicate "$WORK/sbom.spdx.json" "$IMAGE@$DIGEST" >/dev/null 2>&1 \
  || die "cosign attest failed"
"$COSIGN" verify-attestation "${VERIFY[@]}" --type spdxjson "$IMAGE@$DIGEST" >/dev/null 2>&1 \
  || die "cosign verify-attestation refused the SBOM attestation"
say "the SBOM: attest --type spdxjson, verify-attestation --type spdxjson"
refused "the image under another key" "$COSIGN" verify "${OTHER[@]}" "$IMAGE:$VERSION"
"$CRANE" append --insecure --oci-empty-base -f "$WORK/layer.tar" -t "$IMAGE:unsigned" >/dev/null 2>&1
"$CRANE" mutate --insecure "$IMAGE:unsigned" -l unsigned=yes -t "$IMAGE:unsigned" >/dev/null 2>&1
refused "an unsigned image" "$COSIGN" verify "${VERIFY[@]}" "$IMAGE:unsigned"
say "ok: cosign $COSIGN_VERSION signs and verifies the chart and the image as the release workflow and the docs do"
