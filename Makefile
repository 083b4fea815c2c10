# The two commands a newcomer needs (see README):
#   make run   - build, start a local control plane (building it the first time), run the controller against it
#   make test  - fmt, clippy, unit and integration tests against a fresh local control plane
CARGO   ?= cargo
TESTENV := target/debug/testenv
# Extra controller flags for `make run`, e.g. make run ARGS="--reload-strategy=annotations"
ARGS    ?=
# Integration tests wait on the cluster, not the CPU: run many at once.
TEST_THREADS ?= 8

# Benchmarks (see BENCHMARKS.md). Extra bench flags: make bench BENCH_ARGS="--duration 30s"
BENCH_ARGS ?=
BENCH_OURS := target/release/reloader --coalesce-window=0s --metrics-addr=127.0.0.1:0
BENCH_COALESCING := target/release/reloader --coalesce-window=1s --metrics-addr=127.0.0.1:0

.PHONY: test test-oldest run lint testenv-binaries build release release-dry-run sign-check release-binary manifests bench bench-quick bench-build image image-check

# `make test KUBE_VERSION=v1.34.4` runs it against another Kubernetes (testenv/versions.env; built once, cached);
# `make test-oldest` against the oldest one pinned there (K8S_OLDEST_TESTED), as before a release.
# A fresh clone builds once: incremental caches would only add ~1.7 GB of target/ (see [profile.dev] in Cargo.toml).
test: export CARGO_INCREMENTAL = 0
test: lint build release-binary
	$(TESTENV) build >/dev/null
	$(TESTENV) run --name test -- $(CARGO) test --workspace --all-targets -- --test-threads=$(TEST_THREADS)

test-oldest:
	$(MAKE) test KUBE_VERSION="$$(. testenv/versions.env && echo "$$K8S_OLDEST_TESTED")"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

build:
	$(CARGO) build --workspace --all-targets

# The release binary (glibc; what the benchmarks measure), and a check that its code layout list still matches it
# (build.rs; regenerate with build/symbol-order.sh): a warning here, since a stale list costs memory, not
# correctness; the benchmarks, whose figures depend on it, refuse a stale list.
release-binary:
	$(CARGO) build --release --locked --bin reloader
	build/check-symbol-order.sh target/release/reloader

# A release: `make release VERSION=x.y.z` sets the version everywhere, commits and tags it locally, builds the
# image, the packaged chart, the rendered manifest and their checksums into target/release-x.y.z/, and prints the
# commands that publish them (build/release.sh). Nothing leaves this machine.
release: testenv-binaries
	build/release.sh "$(VERSION)"

# The same in a throwaway clone of HEAD (target/release-dry-run): no commit or tag here. NO_IMAGE=1 skips the image
# build, the longest step; HELM=/path/to/helm skips building the test tools for helm.
NO_IMAGE ?= 0
release-dry-run: $(if $(HELM),,testenv-binaries)
	RELEASE_NO_IMAGE=$(NO_IMAGE) build/release.sh --dry-run "$(VERSION)"

# The release workflow's and the docs' cosign commands, with a key pair made for the run, against a registry in
# memory (build/sign-check.sh; not part of `make test`: its first run builds cosign from the Go module proxy).
sign-check: $(if $(HELM),,testenv-binaries)
	build/sign-check.sh

# The controller's multi-arch OCI image (linux/amd64, linux/arm64) without a container daemon: static musl binaries,
# assembled by crane into target/image/oci and target/image/reloader-<version>.oci.tar (build/image.sh says how).
# Needs clang, lld and llvm-ar (Debian: apt-get install clang lld llvm).
image:
	build/image.sh

# The image's own test (tests/image.rs; not part of `make test`, whose cold CI run it would take past its budget):
# both platforms, static binaries, labels, no shell; the amd64 binary out of the layer reloads a Deployment on a
# local control plane and the arm64 one answers --version under qemu-user (Debian: apt-get install qemu-user).
image-check: image build
	$(TESTENV) build >/dev/null
	$(TESTENV) run --name image -- $(CARGO) test --test image -- --ignored

# Regenerate deploy/kubernetes/reloader.yaml and the chart's golden files from deploy/helm/reloader.
manifests: build
	HELM="$$($(TESTENV) build)/helm" deploy/render.sh

run: build
	$(TESTENV) run --name run -- ./target/debug/reloader $(ARGS)

testenv-binaries: build
	$(TESTENV) build

bench-build:
	$(CARGO) build --release -p reloader -p bench
	build/check-symbol-order.sh --strict target/release/reloader

BENCH_S := S1,S2,S3,S4,S5,S6,S7,S8,S9,S10,S11,S12,S13

# S1–S13 with our binary (coalescing off) and again with coalescing on as the baseline; S1–S13 and M1 again with
# kube-controller-manager not rolling workloads out (--no-rollouts: the controller's own latency, without the
# ReplicaSets and pods each reload spawns competing for the 2 cores); then M1 with rollouts. See BENCHMARKS.md.
bench: bench-build
	target/release/bench --scenarios $(BENCH_S) --duration 10s \
		--controller-cmd "$(BENCH_OURS)" --baseline-cmd "$(BENCH_COALESCING)" --baseline-label coalescing \
		--out target/bench/all $(BENCH_ARGS)
	target/release/bench --no-rollouts --scenarios $(BENCH_S),M1 --duration 10s --controller-cmd "$(BENCH_OURS)" \
		--out target/bench/no-rollouts $(BENCH_ARGS)
	target/release/bench --scenarios M1 --controller-cmd "$(BENCH_OURS)" --out target/bench/m1 $(BENCH_ARGS)

# Upstream's loadtest-quick: S1, S4, S6 with our binary.
bench-quick: bench-build
	target/release/bench --scenarios quick --duration 10s --controller-cmd "$(BENCH_OURS)" \
		--out target/bench/quick $(BENCH_ARGS)

# Chaos suite (RELIABILITY.md): faults 1–9, each with both reload strategies, on a local control plane of its own
# (≈ 14 min once built). Exits 1 when any run misses, duplicates or adds a rollout. A subset:
#   make chaos CHAOS_ARGS="--faults 1,7 --strategies env-vars"
CHAOS_ARGS ?=
CHAOS_CONTROLLER := target/release/reloader --metrics-addr=127.0.0.1:0

.PHONY: chaos
chaos: bench-build
	target/release/chaos --controller-cmd "$(CHAOS_CONTROLLER)" --out target/chaos $(CHAOS_ARGS)

# Soak (issue 27): 10,000 kustomize-style hash-suffixed ConfigMap cycles and 200 preview namespaces churned past
# the controller; every map of its index must end at its size before the churn, with 0 reloads missed (exit 1
# otherwise). See BENCHMARKS.md, "Soak". Smaller: make soak SOAK_ARGS="--cycles 1000 --namespaces 20"
SOAK_ARGS ?=

.PHONY: soak
soak: bench-build
	target/release/soak --controller-cmd "$(CHAOS_CONTROLLER)" --out target/soak $(SOAK_ARGS)
