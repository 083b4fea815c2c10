#!/usr/bin/env bash
# `make release VERSION=x.y.z`: prepares a release in target/release-x.y.z/ and prints the commands that
# publish it. Nothing leaves this machine.
#
#   1. refuses a dirty tree or a version that is not x.y.z (semver);
#   2. sets the version: Cargo.toml (and Cargo.lock), the chart's version and appVersion, CHANGELOG.md's
#      *Unreleased* becomes `## [x.y.z] - <date>`; regenerates the rendered manifests (their image tag);
#   3. commits "Release x.y.z" and tags vx.y.z (locally);
#   4. builds, from that commit: the image (build/image.sh: OCI layout and tarball, both platforms, their SBOMs), the
#      packaged
#      chart (helm package), the rendered manifest, and SHA256SUMS of all of them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=${1:-}
say() { printf '[release] %s\n' "$*" >&2; }
die() { printf '[release] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "usage: make release VERSION=x.y.z (got '$VERSION')"
cd "$ROOT"
[ -z "$(git status --porcelain)" ] || die "the work tree has changes: commit or stash them first"
git rev-parse -q --verify "refs/tags/v$VERSION" >/dev/null && die "tag v$VERSION exists already"
HELM="$(target/debug/testenv build 2>/dev/null | tail -1)/helm"
[ -x "$HELM" ] || die "helm not found (make testenv-binaries builds it)"

say "version $VERSION"
python3 - "$VERSION" "$(date -u +%Y-%m-%d)" <<'PY'
import re, sys
version, today = sys.argv[1:]
def edit(path, fn):
    text = open(path).read()
    new = fn(text)
    if new == text:
        sys.exit(f"{path}: nothing to change for {version}")
    open(path, "w").write(new)
# The [package] version of the controller (the first `version =` after `[package]`).
edit("Cargo.toml", lambda t: re.sub(r'(\[package\]\nname = "reloader"\nversion = )"[^"]*"', rf'\1"{version}"', t, count=1))
def chart(t):
    t = re.sub(r'(?m)^version: .*$', f'version: {version}', t, count=1)
    return re.sub(r'(?m)^appVersion: .*$', f'appVersion: "{version}"', t, count=1)
edit("deploy/helm/reloader/Chart.yaml", chart)
def changelog(t):
    if "## [Unreleased]" not in t:
        sys.exit("CHANGELOG.md has no '## [Unreleased]' section")
    t = t.replace("## [Unreleased]", f"## [Unreleased]\n\n## [{version}] - {today}", 1)
    t = re.sub(r'(?m)^\[Unreleased\]: (.*)/compare/v[^.]+\.[^.]+\.[^.]+\.\.\.HEAD$',
               rf'[Unreleased]: \1/compare/v{version}...HEAD\n[{version}]: \1/releases/tag/v{version}', t, count=1)
    return t
edit("CHANGELOG.md", changelog)
PY
cargo update --workspace --offline >/dev/null 2>&1 || die "cargo update --workspace (Cargo.lock) failed"
HELM="$HELM" deploy/render.sh >/dev/null
git commit -q -am "Release $VERSION"
git tag -a "v$VERSION" -m "Release $VERSION"
say "committed and tagged v$VERSION ($(git rev-parse --short HEAD))"

OUT=$ROOT/target/release-$VERSION
rm -rf "$OUT" && mkdir -p "$OUT"
build/image.sh "$OUT/image"
"$HELM" package deploy/helm/reloader --destination "$OUT" >/dev/null
cp deploy/kubernetes/reloader.yaml "$OUT/reloader-$VERSION.yaml"
cp CHANGELOG.md "$OUT/"
(cd "$OUT" && sha256sum "reloader-$VERSION.tgz" "reloader-$VERSION.yaml" "image/reloader-$VERSION.oci.tar" \
   image/reloader-linux-amd64 image/reloader-linux-arm64 image/sbom-linux-amd64.spdx.json \
   image/sbom-linux-arm64.spdx.json > SHA256SUMS)
# shellcheck source=versions.env
. build/versions.env
CRANE=${RELOADER_TOOLS_CACHE:-$HOME/.cache/reloader-rs/tools}/crane-$CRANE_VERSION/crane  # as build/image.sh
cat <<EOF

Release $VERSION prepared in $OUT:
$(cd "$OUT" && ls -1)

Publish (registry and chart repository are yours to choose):
  git push origin HEAD "v$VERSION"
  $CRANE push $OUT/image/oci ghcr.io/reloader-rs/reloader:$VERSION
  $HELM push $OUT/reloader-$VERSION.tgz oci://ghcr.io/reloader-rs/charts
  # then attach SHA256SUMS, reloader-$VERSION.yaml and the binaries to the GitHub release of v$VERSION
EOF
