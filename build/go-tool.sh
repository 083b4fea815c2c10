# Sourced by the build scripts (build/image.sh, build/sign-check.sh) after they set TOOLS and define say and die:
# the tools they build from the Go module proxy, each version built once into $TOOLS/NAME-VERSION and shared.
# shellcheck shell=bash

# go_tool NAME VERSION PACKAGE [LDFLAGS]: prints the path of the tool, building it first when absent.
go_tool() {
  local bin=$TOOLS/$1-$2/$1
  if ! [ -x "$bin" ]; then
    command -v go >/dev/null || die "go is not installed (Go ≥ 1.26, to build $1 from the Go module proxy)"
    say "$1 $2: building from the Go module proxy (1-3 min)"
    GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN=$(dirname "$bin") go install -trimpath \
      -ldflags="-s -w ${4:-}" "$3@$2" >&2 || die "go install $3@$2 failed"
  fi
  echo "$bin"
}

# crane_tool: crane at CRANE_VERSION, stamped with it (whichever script builds it first, the same binary).
crane_tool() {
  go_tool crane "$CRANE_VERSION" github.com/google/go-containerregistry/cmd/crane \
    "-X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION"
}
