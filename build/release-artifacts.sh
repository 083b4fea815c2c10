#!/usr/bin/env bash
# The files of a release, built from the checked-out commit. build/release.sh runs it after tagging, and the
# release workflow's `build` job runs it on the pushed tag: one script, so a local (dry) run builds exactly what
# the workflow publishes.
#
#   HELM=/path/to/helm build/release-artifacts.sh OUT
#
#   OUT/image/                  build/image.sh's output: the OCI layout (OUT/image/oci, pushed as is), its tarball,
#                               the index digest
#   OUT/reloader-<v>.tgz        the packaged chart (helm package)
#   OUT/reloader-<v>.yaml       the rendered manifest (deploy/kubernetes/reloader.yaml)
#   OUT/reloader-linux-<arch>   each platform's binary, as in the image
#   OUT/sbom-linux-<arch>.spdx.json  each platform's SBOM
#   OUT/notes.md                CHANGELOG.md's section of <v>: the GitHub release's text
#   OUT/SHA256SUMS              checksums of the files attached to the GitHub release (all of the above but image/)
#
# <v> is Cargo.toml's version; the chart's version and appVersion and the manifest's image tag must name it.
# RELEASE_NO_IMAGE=1 leaves the image out (its two musl release builds take most of the time: CONTRIBUTING.md, Timings);
# for a dry run of everything else. The checksums then cover the chart and the manifest only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: HELM=/path/to/helm build/release-artifacts.sh OUT}
HELM=${HELM:?set HELM to the helm binary (testenv/versions.env pins its version)}
say() { printf '[release] %s\n' "$*" >&2; }
die() { printf '[release] ERROR: %s\n' "$*" >&2; exit 1; }
cd "$ROOT"

# The one version, checked everywhere it is written, so a release never ships a chart that names another image.
VERSION=$(awk -F'"' '/^\[package\]/{p=1} p && /^version *=/{print $2; exit}' Cargo.toml)
grep -qx "version: $VERSION" deploy/helm/reloader/Chart.yaml || die "Chart.yaml's version is not $VERSION"
grep -qx "appVersion: \"$VERSION\"" deploy/helm/reloader/Chart.yaml || die "Chart.yaml's appVersion is not $VERSION"
grep -q "image: \".*/reloader:$VERSION\"" deploy/kubernetes/reloader.yaml \
  || die "deploy/kubernetes/reloader.yaml does not run image tag $VERSION (make manifests)"
# The commands of the user documents (image tags, chart versions and files, git refs) name this version too
# (build/release.sh moves them): a reader of the release's README installs what it ships.
stale=$(grep -nE '(reloader:|reloader-|--version |\?ref=v|refs/tags/v)[0-9]+\.[0-9]+\.[0-9]+' README.md docs/*.md \
  deploy/helm/reloader/README.md deploy/kubernetes/kustomization.yaml | grep -vF "$VERSION" || true)
[ -z "$stale" ] || die "documents name another version than $VERSION:"$'\n'"$stale"

rm -rf "$OUT" && mkdir -p "$OUT"
assets=("reloader-$VERSION.tgz" "reloader-$VERSION.yaml")
if [ "${RELEASE_NO_IMAGE:-0}" = 1 ]; then
  say "RELEASE_NO_IMAGE=1: the image, its binaries and SBOMs are not built"
else
  build/image.sh "$OUT/image"
  for arch in amd64 arm64; do
    cp "$OUT/image/reloader-linux-$arch" "$OUT/image/sbom-linux-$arch.spdx.json" "$OUT/"
    assets+=("reloader-linux-$arch" "sbom-linux-$arch.spdx.json")
  done
fi
"$HELM" package deploy/helm/reloader --destination "$OUT" >/dev/null
cp deploy/kubernetes/reloader.yaml "$OUT/reloader-$VERSION.yaml"

# The release text: from `## [<v>]` to the next `## [` heading. An empty one means CHANGELOG.md has no section for
# this version (build/release.sh writes it), which would publish a release without notes.
awk -v v="$VERSION" 'index($0, "## [" v "]") == 1 {p=1; next} p && /^## \[/ {exit} p' CHANGELOG.md > "$OUT/notes.md"
grep -q '[^[:space:]]' "$OUT/notes.md" || die "CHANGELOG.md has no '## [$VERSION]' section with entries"

(cd "$OUT" && sha256sum "${assets[@]}" > SHA256SUMS)
say "release $VERSION files in $OUT: ${assets[*]} notes.md SHA256SUMS"
