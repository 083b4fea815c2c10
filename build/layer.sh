#!/usr/bin/env bash
# The image's one layer for a platform, laid out in a folder; build/image.sh and the Dockerfile both call this,
# so they build the same image.
#
#   build/layer.sh <amd64|arm64> <folder>
#
# A static musl build of the controller (`cargo auditable build --release --target <arch>-unknown-linux-musl`,
# symbols stripped; cargo-auditable embeds the list of crates compiled in, which the image's SBOM is made from and
# `cargo audit bin` checks), compiled and linked by clang and lld (Debian: apt-get install clang lld llvm; one
# toolchain for both architectures, no cross gcc; its one C library, mimalloc, against musl's headers from
# Debian's musl-dev package of the architecture, fetched once into the tools cache), then: /reloader, the CA roots (alert webhooks over HTTPS),
# /etc/passwd and /etc/group naming 65534 (for tools that look the user up; the process never does), and an empty
# /tmp.
set -euo pipefail
ARCH=${1:?usage: build/layer.sh <amd64|arm64> <folder>}
DIR=${2:?usage: build/layer.sh <amd64|arm64> <folder>}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
die() { printf '[layer] ERROR: %s\n' "$*" >&2; exit 1; }

case $ARCH in
  amd64) t=x86_64-unknown-linux-musl;;
  arm64) t=aarch64-unknown-linux-musl;;
  *) die "unsupported platform linux/$ARCH (amd64, arm64)";;
esac
for tool in clang ld.lld llvm-ar llvm-strip; do
  command -v "$tool" >/dev/null || die "$tool is not installed (Debian: apt-get install clang lld llvm)"
done
[ -s "$CA_BUNDLE" ] || die "no CA bundle at $CA_BUNDLE (Debian: apt-get install ca-certificates, or set CA_BUNDLE)"
# cargo-auditable, pinned in versions.env, installed once from crates.io.
# shellcheck source=versions.env
. "$ROOT/build/versions.env"
AUDITABLE=${RELOADER_TOOLS_CACHE:-$HOME/.cache/reloader-rs/tools}/cargo-auditable-$CARGO_AUDITABLE_VERSION
if ! [ -x "$AUDITABLE/bin/cargo-auditable" ]; then
  cargo install --locked --quiet cargo-auditable --version "$CARGO_AUDITABLE_VERSION" --root "$AUDITABLE" >&2 \
    || die "cargo install cargo-auditable@$CARGO_AUDITABLE_VERSION failed"
fi
export PATH=$AUDITABLE/bin:$PATH
rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t" >&2 \
  || die "the Rust standard library for $t is missing: rustup target add $t"

# musl's headers for the target, unpacked from Debian's musl-dev package (checked against its pinned digest).
HEADERS=${RELOADER_TOOLS_CACHE:-$HOME/.cache/reloader-rs/tools}/musl-dev-$MUSL_DEV_VERSION-$ARCH
if ! [ -d "$HEADERS/usr/include/${t%%-*}-linux-musl" ]; then
  sha_var=MUSL_DEV_SHA256_$ARCH; deb=musl-dev_${MUSL_DEV_VERSION}_$ARCH.deb
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  curl -sSfL -o "$work/$deb" "http://deb.debian.org/debian/pool/main/m/musl/$deb" || die "downloading $deb failed"
  echo "${!sha_var}  $work/$deb" | sha256sum -c --quiet - || die "$deb does not match its pinned digest"
  (cd "$work" && llvm-ar x "$deb" data.tar.xz) && mkdir -p "$work/root" && tar -xJf "$work/data.tar.xz" -C "$work/root" \
    || die "unpacking $deb failed"
  mkdir -p "$(dirname "$HEADERS")" && rm -rf "$HEADERS" && mv "$work/root" "$HEADERS"
fi

T=$(echo "$t" | tr 'a-z-' 'A-Z_'); t_=${t//-/_}
env "CC_$t_=clang" "AR_$t_=llvm-ar" "CFLAGS_$t_=-nostdlibinc -isystem $HEADERS/usr/include/${t%%-*}-linux-musl" \
  "CARGO_TARGET_${T}_LINKER=clang" \
  "CARGO_TARGET_${T}_RUSTFLAGS=-C link-arg=--target=$t -C link-arg=-fuse-ld=lld -C target-feature=+crt-static" \
  cargo auditable build --release --locked --bin reloader --target "$t" --manifest-path "$ROOT/Cargo.toml" >&2
# Where cargo put it: CARGO_TARGET_DIR when set (a dry run's clone builds into the work tree's target/ so).
BUILT=$(realpath "${CARGO_TARGET_DIR:-$ROOT/target}/$t/release/reloader")
# The amd64 build places the functions the controller runs first (build.rs, build/symbol-order-musl.txt); a list
# the build renamed only costs memory: a warning.
if [ "$ARCH" = amd64 ]; then NM=llvm-nm "$ROOT/build/check-symbol-order.sh" "$BUILT" build/symbol-order-musl.txt >&2; fi

rm -rf "$DIR" && mkdir -p "$DIR/etc/ssl/certs" "$DIR/tmp"
chmod 0755 "$DIR" "$DIR/etc" "$DIR/etc/ssl" "$DIR/etc/ssl/certs" && chmod 1777 "$DIR/tmp"
# The image's binary goes without symbols (a quarter smaller). Stripped here, not by cargo: a profile that strips
# is another build, whose functions have other names than the unstripped one build/symbol-order.sh profiles. The
# crate list cargo-auditable embeds (.dep-v0) stays.
llvm-strip --strip-all --keep-section=.dep-v0 -o "$DIR/reloader" "$BUILT" && chmod 0755 "$DIR/reloader"
install -m 0644 "$CA_BUNDLE" "$DIR/etc/ssl/certs/ca-certificates.crt"
printf 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' > "$DIR/etc/passwd"
printf 'nogroup:x:65534:\n' > "$DIR/etc/group"
chmod 0644 "$DIR/etc/passwd" "$DIR/etc/group"
