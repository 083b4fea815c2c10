#!/usr/bin/env bash
# `make image`: the controller's multi-arch OCI image (linux/amd64, linux/arm64), built without a container daemon.
#
#   build/image.sh [OUT]      (OUT defaults to target/image)
#
# Each platform's layer comes from build/layer.sh (a static musl binary, the CA roots, passwd/group naming 65534,
# /tmp; no shell, no package manager), which the Dockerfile uses too. It runs as 65534:65534 (the chart's and
# upstream's runAsUser).
# go-containerregistry's crane (built once from the Go module proxy, pinned in build/versions.env) assembles the
# two images and their index in a registry it serves in memory, then writes them out:
#
#   OUT/oci/                         the OCI image layout (index of both platforms)
#   OUT/reloader-<version>.oci.tar   the same layout as one tarball (`crane push OUT/oci <registry>/reloader:<tag>`)
#   OUT/reloader-linux-<arch>        each platform's binary, as in its layer
#   OUT/sbom-linux-<arch>.spdx.json  each platform's SBOM (syft, from the crate list cargo-auditable embeds)
#   OUT/digest                       the index digest
#
# The version and commit come from Cargo.toml and git (build.rs) and land in the labels too.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/image}
# shellcheck source=versions.env
. "$ROOT/build/versions.env"
TOOLS=${RELOADER_TOOLS_CACHE:-$HOME/.cache/reloader-rs/tools}
PLATFORMS=${IMAGE_PLATFORMS:-amd64 arm64}

say() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }

# shellcheck source=go-tool.sh
. "$ROOT/build/go-tool.sh"
CRANE=$(crane_tool)
SYFT=$(go_tool syft "$SYFT_VERSION" github.com/anchore/syft/cmd/syft "-X main.version=$SYFT_VERSION")

VERSION=$(awk -F'"' '/^\[package\]/{p=1} p && /^version *=/{print $2; exit}' "$ROOT/Cargo.toml")
# The commit as build.rs sees it (RELOADER_BUILD_COMMIT/_TIME first), so labels and `--version` agree.
COMMIT=${RELOADER_BUILD_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}
CREATED=${RELOADER_BUILD_COMMIT_TIME:-$(TZ=UTC git -C "$ROOT" show -s --format=%cd \
  --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null || echo 1970-01-01T00:00:00Z)}
SOURCE=$(awk -F'"' '/^repository *=/{print $2; exit}' "$ROOT/Cargo.toml")
rm -rf "$OUT" && mkdir -p "$OUT/layers"

for arch in $PLATFORMS; do
  say "linux/$arch: the layer (build/layer.sh)"
  "$ROOT/build/layer.sh" "$arch" "$OUT/layers/$arch"
  cp "$OUT/layers/$arch/reloader" "$OUT/reloader-linux-$arch"
  # Byte for byte the same for the same inputs: fixed order, owners and times.
  tar -C "$OUT/layers/$arch" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cf "$OUT/layers/$arch.tar" etc reloader tmp
done

# A registry in memory, for crane's push/mutate/index steps; stopped on exit.
PORT_FILE=$OUT/registry.log
"$CRANE" registry serve --address 127.0.0.1:0 >"$PORT_FILE" 2>&1 &
REGISTRY_PID=$!
trap 'kill $REGISTRY_PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q 'serving on port' "$PORT_FILE" 2>/dev/null && break; sleep 0.1; done
PORT=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$PORT_FILE" | head -1)
[ -n "$PORT" ] || die "crane registry did not start: $(cat "$PORT_FILE")"
REPO=127.0.0.1:$PORT/reloader

labels=(
  -l "org.opencontainers.image.title=reloader"
  -l "org.opencontainers.image.description=Rolls out Kubernetes workloads when the ConfigMaps and Secrets they use change; drop-in for Stakater Reloader"
  -l "org.opencontainers.image.version=$VERSION"
  -l "org.opencontainers.image.revision=$COMMIT"
  -l "org.opencontainers.image.created=$CREATED"
  -l "org.opencontainers.image.source=$SOURCE"
  -l "org.opencontainers.image.licenses=Apache-2.0"
)
manifests=()
for arch in $PLATFORMS; do
  say "linux/$arch: assembling"
  "$CRANE" append --insecure --oci-empty-base -f "$OUT/layers/$arch.tar" -t "$REPO:$arch" >/dev/null
  digest=$("$CRANE" mutate --insecure "$REPO:$arch" -t "$REPO:$arch" --set-platform "linux/$arch" \
    --entrypoint /reloader --user 65534:65534 --exposed-ports 9090/tcp "${labels[@]}")
  manifests+=(-m "$digest")
done
"$CRANE" index append --insecure "${manifests[@]}" -t "$REPO:$VERSION" >/dev/null
"$CRANE" pull --insecure --format oci "$REPO:$VERSION" "$OUT/oci"
"$CRANE" digest --insecure "$REPO:$VERSION" >"$OUT/digest"
# The SBOM of each platform's image (SPDX 2.3 JSON): syft reads the crates cargo-auditable embedded in the binary.
for arch in $PLATFORMS; do
  SYFT_CHECK_FOR_APP_UPDATE=false "$SYFT" scan --quiet --platform "linux/$arch" "oci-dir:$OUT/oci" \
    --source-name reloader --source-version "$VERSION" -o "spdx-json=$OUT/sbom-linux-$arch.spdx.json" \
    || die "syft could not write the SBOM of linux/$arch"
done
tar -C "$OUT/oci" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$OUT/reloader-$VERSION.oci.tar" .
rm -rf "$OUT/layers" "$PORT_FILE"
say "reloader $VERSION ($COMMIT): $OUT/oci, index $(cat "$OUT/digest")"
for arch in $PLATFORMS; do
  say "  linux/$arch: $(du -k "$OUT/reloader-linux-$arch" | cut -f1) KiB binary"
done
