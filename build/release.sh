#!/usr/bin/env bash
# `make release VERSION=x.y.z`: prepares release x.y.z in target/release-x.y.z/ and prints the commands that
# publish it. Nothing leaves this machine.
#
#   1. refuses a dirty tree, a version that is not x.y.z (semver) or not newer than Cargo.toml's, an existing tag;
#   2. sets the version: Cargo.toml (and Cargo.lock), the chart's version and appVersion, CHANGELOG.md's
#      *Unreleased* becomes `## [x.y.z] - <date>`, the image tags, chart versions and git refs the README and docs/
#      name; regenerates the rendered manifests (their image tag);
#   3. commits "Release x.y.z" and tags vx.y.z (locally);
#   4. builds the release's files from that commit with build/release-artifacts.sh, the script the release
#      workflow's build job runs: image, binaries, SBOMs, packaged chart, rendered manifest, notes, SHA256SUMS.
#
# `make release-dry-run VERSION=x.y.z` (--dry-run) does all of it in a throwaway clone of HEAD,
# target/release-dry-run/: the commit and the tag are made there, this work tree, its branches and tags are left
# alone. RELEASE_NO_IMAGE=1 (make ... NO_IMAGE=1) skips the image build in a dry run, the longest step.
#
# helm: $HELM, else the one `target/debug/testenv build` builds (make testenv-binaries).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DRY_RUN=0
if [ "${1:-}" = --dry-run ]; then DRY_RUN=1; shift; fi
VERSION=${1:-}
say() { printf '[release] %s\n' "$*" >&2; }
die() { printf '[release] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "usage: make release[-dry-run] VERSION=x.y.z (got '$VERSION')"
cd "$ROOT"
if [ -z "${HELM:-}" ] && [ -x target/debug/testenv ]; then HELM="$(target/debug/testenv build 2>/dev/null | tail -1)/helm"; fi
[ -x "${HELM:-}" ] || die "helm not found: make testenv-binaries builds it, or set HELM=/path/to/helm"
export HELM

if [ "$DRY_RUN" = 1 ]; then
  # The committed HEAD only: what a real release would cut. Detached, so the clone's "Release" commit lands on no
  # branch anyone pushes.
  CLONE=$ROOT/target/release-dry-run
  rm -rf "$CLONE"
  git clone -q --no-checkout "$ROOT" "$CLONE"
  git -C "$CLONE" checkout -q --detach "$(git rev-parse HEAD)"
  [ -z "$(git status --porcelain)" ] || say "uncommitted changes here are not in the dry run (it clones HEAD)"
  say "dry run of $(git rev-parse --short HEAD) in $CLONE"
  RELEASE_IN_DRY_RUN=1 "$CLONE/build/release.sh" "$VERSION"
  say "dry run done: this work tree, its branches and tags are unchanged; the files are in $CLONE/target/release-$VERSION"
  exit 0
fi
# A release without its image is only worth checking, never publishing.
if [ "${RELEASE_NO_IMAGE:-0}" = 1 ] && [ "${RELEASE_IN_DRY_RUN:-0}" != 1 ]; then
  die "RELEASE_NO_IMAGE=1 is for dry runs only (make release-dry-run VERSION=$VERSION NO_IMAGE=1)"
fi

[ -z "$(git status --porcelain)" ] || die "the work tree has changes: commit or stash them first"
git rev-parse -q --verify "refs/tags/v$VERSION" >/dev/null && die "tag v$VERSION exists already"
CURRENT=$(awk -F'"' '/^\[package\]/{p=1} p && /^version *=/{print $2; exit}' Cargo.toml)
NEWEST=$(printf '%s\n%s\n' "$CURRENT" "$VERSION" | sort -V | tail -1)
if [ "$CURRENT" = "$VERSION" ] || [ "$NEWEST" != "$VERSION" ]; then
  die "$VERSION is not newer than Cargo.toml's version $CURRENT: a release names the next version"
fi

say "version $VERSION"
python3 - "$VERSION" "$CURRENT" "$(date -u +%Y-%m-%d)" <<'PY'
import glob, re, sys
version, current, today = sys.argv[1:]
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
    # The link definitions at the end: Unreleased compares with this tag, which gets its own.
    return re.sub(r'(?m)^\[Unreleased\]: (https://github\.com/[^/\s]+/[^/\s]+)/\S*$',
                  rf'[Unreleased]: \1/compare/v{version}...HEAD\n[{version}]: \1/releases/tag/v{version}', t, count=1)
edit("CHANGELOG.md", changelog)
# The user documents name the checkout's version where a command needs one (an image tag, a chart version or file,
# a git ref or tag): they move with it, so the Quick start's image tag stays the chart's appVersion.
# build/release-artifacts.sh refuses a release whose documents name another.
for path in ["README.md", "deploy/helm/reloader/README.md", "deploy/kubernetes/kustomization.yaml", *glob.glob("docs/*.md")]:
    text = open(path).read()
    new = re.sub(r'(reloader:|reloader-|--version |\?ref=v|refs/tags/v)' + re.escape(current) + r'(?!\.?[0-9])', rf'\g<1>{version}', text)
    if new != text:
        open(path, "w").write(new)
PY
cargo update --workspace --offline >/dev/null 2>&1 || die "cargo update --workspace (Cargo.lock) failed"
deploy/render.sh >/dev/null
git commit -q -am "Release $VERSION"
git tag -a "v$VERSION" -m "Release $VERSION"
say "committed and tagged v$VERSION ($(git rev-parse --short HEAD))"

OUT=$ROOT/target/release-$VERSION
build/release-artifacts.sh "$OUT"
# shellcheck source=build/versions.env
. build/versions.env
CRANE=${RELOADER_TOOLS_CACHE:-$HOME/.cache/reloader-rs/tools}/crane-$CRANE_VERSION/crane  # as build/image.sh
cat <<EOF

Release $VERSION prepared in $OUT:
$(cd "$OUT" && ls -1)

Publish: push the tag, and .github/workflows/release.yml builds the same files on GitHub, pushes and signs them:
  git push origin HEAD "v$VERSION"
By hand instead (registry and chart repository are yours to choose; nothing is signed):
  $CRANE push $OUT/image/oci <registry>/reloader:$VERSION
  $HELM push $OUT/reloader-$VERSION.tgz oci://<registry>/charts
  # then attach SHA256SUMS and the files it lists to a release of v$VERSION
EOF
