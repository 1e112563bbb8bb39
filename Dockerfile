# syntax=docker/dockerfile:1
# wasmctrl with the GPU-summary guest baked in as a default
# (/guests/gpu-summary.wasm; the Deployment mounts the guest ConfigMap over it).
#
#   docker build -t ghcr.io/wasmctrl/wasmctrl:0.1.0 .

# Build on Debian 12 (bookworm): the binary links glibc dynamically, and the
# runtime image below is Debian 12 too, so the glibc it was linked against is
# the one it runs with (a trixie build would need a newer glibc).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# `make guest` is what CI runs: adds wasm32-wasip2, builds the guest with
# `--profile guest` and fails if it is over the ConfigMap budget. The host is
# built with default features: the product, without the embedded API server
# (`make product` checks the same build).
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    make guest CARGO="cargo --locked" \
 && cargo build --locked --release -p wasmctrl \
 && mkdir -p /out \
 && cp target/release/wasmctrl /out/wasmctrl \
 && cp target/wasm32-wasip2/guest/guest_gpu_summary.wasm /out/gpu-summary.wasm

# glibc, libgcc and CA certificates, no shell; runs as nonroot (65532).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/wasmctrl /usr/local/bin/wasmctrl
COPY --from=build /out/gpu-summary.wasm /guests/gpu-summary.wasm
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/wasmctrl"]
CMD ["run", "--guest-dir", "/guests"]
