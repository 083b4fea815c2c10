# syntax=docker/dockerfile:1
# The controller's image for builders with a container daemon; `make image` (build/image.sh) builds the same image
# without one, and is what this project tests (`make image-check`). Both lay out the one layer with build/layer.sh
# (a static musl binary, the CA roots, passwd/group naming 65534, an empty /tmp; no shell). Runs as 65534:65534
# ("nobody", the chart's and upstream's runAsUser) with a read-only root filesystem (nothing is written).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/reloader:<tag> .
#
# `--sbom=true` adds an SBOM made (by BuildKit's syft scanner) from the crate list cargo-auditable embeds in the
# binary, as `make image` writes beside its image.
#
# Each platform cross-compiles on the build machine's own architecture (no emulation). Without `.git` in the
# context, pass the commit: --build-arg RELOADER_BUILD_COMMIT=$(git rev-parse HEAD).
FROM --platform=$BUILDPLATFORM docker.io/library/rust:1.95-slim-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends clang lld llvm ca-certificates curl xz-utils git \
 && rm -rf /var/lib/apt/lists/*
ARG TARGETARCH
ARG RELOADER_BUILD_COMMIT=""
ARG RELOADER_BUILD_COMMIT_TIME=""
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=private \
    build/layer.sh "$TARGETARCH" /rootfs

FROM scratch
COPY --from=build /rootfs/ /
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["/reloader"]
