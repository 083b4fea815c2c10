# syntax=docker/dockerfile:1
# The controller's image: a static-enough release binary on distroless (glibc, CA certificates for alert
# webhooks, no shell), running as a non-root user (65534, "nobody", the chart's and upstream's runAsUser) with a
# read-only root filesystem (nothing is written).
#
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/reloader:<tag> .
# Each platform compiles natively (under emulation when needed); `make test` builds the same release binary
# (`cargo build --release --locked --bin reloader`). On amd64 the build places the code the controller runs first
# (build.rs, build/symbol-order.txt: an idle controller's memory is mostly its code).
FROM docker.io/library/rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=private \
    cargo build --release --locked --bin reloader \
 && cp target/release/reloader /reloader

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /reloader /reloader
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["/reloader"]
