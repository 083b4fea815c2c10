# The two commands a newcomer needs (see README):
#   make run   - build, start a local control plane (building it the first time), run the controller against it
#   make test  - fmt, clippy, unit and integration tests against a fresh local control plane
CARGO   ?= cargo
TESTENV := target/debug/testenv
# Extra controller flags for `make run`, e.g. make run ARGS="--reload-strategy=annotations"
ARGS    ?=
# Integration tests wait on the cluster, not the CPU: run many at once.
TEST_THREADS ?= 8

.PHONY: test run lint testenv-binaries build release manifests

test: lint build release
	$(TESTENV) build >/dev/null
	$(TESTENV) run --name test -- $(CARGO) test --workspace --all-targets -- --test-threads=$(TEST_THREADS)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

build:
	$(CARGO) build --workspace --all-targets

# The binary the container image ships (see Dockerfile).
release:
	$(CARGO) build --release --locked --bin reloader

# Regenerate deploy/kubernetes/reloader.yaml and the chart's golden files from deploy/helm/reloader.
manifests: build
	HELM="$$($(TESTENV) build)/helm" deploy/render.sh

run: build
	$(TESTENV) run --name run -- ./target/debug/reloader $(ARGS)

testenv-binaries: build
	$(TESTENV) build
