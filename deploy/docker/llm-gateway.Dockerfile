# syntax=docker/dockerfile:1
# llm-gateway: the stateless gRPC gateway to LLM providers.
#
#   docker build -f deploy/docker/llm-gateway.Dockerfile -t llm-gateway .      # from the repository root
#
# Runs as uid 65532 on distroless (no shell, no package manager). Listens on 0.0.0.0:50051 (gRPC) with the baked
# configuration; mount your own at /etc/llm-gateway/gateway.toml (or set GATEWAY_CONFIG) and pass caller tokens and
# provider keys through the environment (GATEWAY_AUTH_TOKENS, OPENAI_API_KEY, ...). docs/operations.md lists them.
ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

# cargo-chef, pinned: `prepare` reduces the workspace to a recipe (manifests, the lockfile, target skeletons; the
# workspace crates' own versions masked, so a version bump does not invalidate it), `cook` builds the dependencies
# from it. That layer is reused until a dependency changes. deploy/README.md ("Images") says why it replaced the
# hand-written recipe script.
ARG CARGO_CHEF_VERSION=0.1.78

# 0. The Rust image with cargo-chef.
FROM ${RUST_IMAGE} AS chef
ARG CARGO_CHEF_VERSION
RUN cargo install --locked "cargo-chef@${CARGO_CHEF_VERSION}"
WORKDIR /src

# 1. The recipe, pruned to the workspace members llm-gateway needs.
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json --bin llm-gateway

# 2. The dependencies, from the recipe alone (the cached layer).
FROM chef AS builder
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json -p llm-gateway --bin llm-gateway

# 3. The real crates (cook removed its dummy builds of them, so they are rebuilt from the sources); debug info
#    stripped (symbols stay, for backtraces).
COPY . .
RUN cargo build --release --locked -p llm-gateway --bin llm-gateway \
 && objcopy --strip-debug target/release/llm-gateway /llm-gateway

FROM ${RUNTIME_IMAGE}
COPY --from=builder /llm-gateway /usr/local/bin/llm-gateway
COPY deploy/docker/llm-gateway.toml /etc/llm-gateway/gateway.toml
ENV GATEWAY_CONFIG=/etc/llm-gateway/gateway.toml
USER 65532:65532
# 50051: gRPC (GatewayService, grpc.health.v1, reflection). 9464: Prometheus /metrics, only when
# server.metrics_listen or GATEWAY_METRICS_LISTEN turns it on.
EXPOSE 50051 9464
# No HEALTHCHECK: the image has no shell or probe binary. The server answers grpc.health.v1.Health without a token:
# Kubernetes probes it natively (`grpc: {port: 50051}`); elsewhere use a gRPC health client such as grpc_health_probe.
# SIGTERM drains: health turns NOT_SERVING, no new calls, streams in flight finish for up to server.shutdown_grace_ms.
ENTRYPOINT ["/usr/local/bin/llm-gateway"]
