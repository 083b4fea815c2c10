# syntax=docker/dockerfile:1
# The controller's image for builders with a container daemon; `make image` (build/image.sh) builds the same image
# without one, and is what this project tests (`make image-check`). Both: a static musl binary compiled and linked
# by clang and lld, one layer with /reloader, the CA roots (alert webhooks over HTTPS), /etc/passwd and /etc/group
# naming 65534, an empty /tmp; no shell. Runs as 65534:65534 ("nobody", the chart's and upstream's runAsUser)
# with a read-only root filesystem (nothing is written).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/reloader:<tag> .
#
# Each platform cross-compiles on the build machine's own architecture (no emulation). Without `.git` in the
# context, pass the commit: --build-arg RELOADER_BUILD_COMMIT=$(git rev-parse HEAD).
FROM --platform=$BUILDPLATFORM docker.io/library/rust:1.95-slim-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends clang lld llvm ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
ARG TARGETARCH
ARG RELOADER_BUILD_COMMIT=""
ARG RELOADER_BUILD_COMMIT_TIME=""
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=private \
    set -eu; \
    case "$TARGETARCH" in amd64) t=x86_64-unknown-linux-musl;; arm64) t=aarch64-unknown-linux-musl;; \
      *) echo "unsupported platform $TARGETARCH" >&2; exit 1;; esac; \
    rustup target add "$t"; \
    T=$(echo "$t" | tr 'a-z-' 'A-Z_'); t_=$(echo "$t" | tr '-' '_'); \
    env "CC_$t_=clang" "AR_$t_=llvm-ar" "CARGO_TARGET_${T}_LINKER=clang" \
      "CARGO_TARGET_${T}_RUSTFLAGS=-C link-arg=--target=$t -C link-arg=-fuse-ld=lld -C target-feature=+crt-static" \
      CARGO_PROFILE_RELEASE_STRIP=symbols \
      cargo build --release --locked --bin reloader --target "$t"; \
    mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp; chmod 1777 /rootfs/tmp; \
    cp "target/$t/release/reloader" /rootfs/reloader; \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/; \
    echo 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' > /rootfs/etc/passwd; \
    echo 'nogroup:x:65534:' > /rootfs/etc/group

FROM scratch
COPY --from=build /rootfs/ /
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["/reloader"]
