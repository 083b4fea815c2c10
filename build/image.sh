#!/usr/bin/env bash
# `make image`: the controller's multi-arch OCI image (linux/amd64, linux/arm64), built without a container daemon.
#
#   build/image.sh [OUT]      (OUT defaults to target/image)
#
# Each platform's binary is a static musl build (`cargo build --release --target <arch>-unknown-linux-musl`),
# compiled and linked by clang and lld from Debian's packages (`apt-get install clang lld`; one toolchain for both
# architectures, no cross gcc). The image has one layer: /reloader, the CA roots (alert webhooks over HTTPS) and
# nothing else — no shell, no package manager. It runs as 65534:65534 (the chart's and upstream's runAsUser).
# go-containerregistry's crane (built once from the Go module proxy, pinned in build/versions.env) assembles the
# two images and their index in a registry it serves in memory, then writes them out:
#
#   OUT/oci/                         the OCI image layout (index of both platforms)
#   OUT/reloader-<version>.oci.tar   the same layout as one tarball (`crane push OUT/oci <registry>/reloader:<tag>`)
#   OUT/reloader-linux-<arch>        each platform's binary, as in its layer
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
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

say() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }

for tool in clang ld.lld llvm-ar python3 git go; do
  command -v "$tool" >/dev/null || die "$tool is not installed (Debian: apt-get install clang lld llvm; Go ≥ 1.26 for crane)"
done
[ -s "$CA_BUNDLE" ] || die "no CA bundle at $CA_BUNDLE (Debian: apt-get install ca-certificates, or set CA_BUNDLE)"

# crane, from the Go module proxy, cached by version.
CRANE=$TOOLS/crane-$CRANE_VERSION/crane
if ! [ -x "$CRANE" ] || [ "$("$CRANE" version 2>/dev/null)" != "$CRANE_VERSION" ]; then
  say "crane $CRANE_VERSION: building from the Go module proxy (~1 min)"
  GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN=$(dirname "$CRANE") go install -trimpath \
    -ldflags="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION" \
    "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" || die "go install crane@$CRANE_VERSION failed"
fi

VERSION=$(awk -F'"' '/^\[package\]/{p=1} p && /^version *=/{print $2; exit}' "$ROOT/Cargo.toml")
COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
CREATED=$(TZ=UTC git -C "$ROOT" show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null \
  || echo 1970-01-01T00:00:00Z)
SOURCE=$(awk -F'"' '/^repository *=/{print $2; exit}' "$ROOT/Cargo.toml")
rm -rf "$OUT" && mkdir -p "$OUT/layers"
# Symbols are for profiling (`make release-binary` keeps them); the image's binaries go without (a quarter of the size).
export CARGO_PROFILE_RELEASE_STRIP=symbols

triple() { case $1 in amd64) echo x86_64-unknown-linux-musl;; arm64) echo aarch64-unknown-linux-musl;; *) die "platform $1?";; esac; }

for arch in $PLATFORMS; do
  t=$(triple "$arch"); T=$(echo "$t" | tr 'a-z-' 'A-Z_'); t_=${t//-/_}
  rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t" >&2 \
    || die "the Rust standard library for $t is missing: rustup target add $t"
  say "linux/$arch: cargo build --release --target $t"
  env "CC_$t_=clang" "AR_$t_=llvm-ar" "CARGO_TARGET_${T}_LINKER=clang" \
    "CARGO_TARGET_${T}_RUSTFLAGS=-C link-arg=--target=$t -C link-arg=-fuse-ld=lld -C target-feature=+crt-static" \
    cargo build --release --locked --bin reloader --target "$t" --manifest-path "$ROOT/Cargo.toml" >&2
  cp "$ROOT/target/$t/release/reloader" "$OUT/reloader-linux-$arch"
  # The layer, byte for byte the same for the same inputs: fixed order, owners and times.
  python3 - "$OUT/reloader-linux-$arch" "$CA_BUNDLE" "$OUT/layers/$arch.tar" <<'PY'
import io, sys, tarfile
binary, bundle, out = sys.argv[1:]
def add(tar, name, data, mode):
    info = tarfile.TarInfo(name); info.size = len(data); info.mode = mode; info.mtime = 0
    tar.addfile(info, io.BytesIO(data))
def directory(tar, name):
    info = tarfile.TarInfo(name); info.type = tarfile.DIRTYPE; info.mode = 0o755; info.mtime = 0
    tar.addfile(info)
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
    for d in ["etc", "etc/ssl", "etc/ssl/certs"]:
        directory(tar, d)
    add(tar, "etc/ssl/certs/ca-certificates.crt", open(bundle, "rb").read(), 0o644)
    # Names for UID/GID 65534, for tools that look them up (the process never does).
    add(tar, "etc/passwd", b"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n", 0o644)
    add(tar, "etc/group", b"nogroup:x:65534:\n", 0o644)
    add(tar, "reloader", open(binary, "rb").read(), 0o755)
    info = tarfile.TarInfo("tmp"); info.type = tarfile.DIRTYPE; info.mode = 0o1777; info.mtime = 0
    tar.addfile(info)
PY
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
tar -C "$OUT/oci" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$OUT/reloader-$VERSION.oci.tar" .
rm -rf "$OUT/layers" "$PORT_FILE"
say "reloader $VERSION ($COMMIT): $OUT/oci, index $(cat "$OUT/digest")"
for arch in $PLATFORMS; do
  say "  linux/$arch: $(du -k "$OUT/reloader-linux-$arch" | cut -f1) KiB binary"
done
