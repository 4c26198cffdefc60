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

# 1. Reduce the workspace to manifests, the lockfile and stub targets (deploy/docker/recipe.sh).
FROM ${RUST_IMAGE} AS planner
WORKDIR /src
COPY . .
RUN sh deploy/docker/recipe.sh /recipe

# 2. Build the dependencies from the recipe: this layer is reused until a Cargo.toml or Cargo.lock changes.
FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY --from=planner /recipe/ ./
RUN cargo build --release --locked -p llm-gateway --bin llm-gateway

# 3. Build the real crate. The stubs compiled above are newer than the sources' own timestamps, so every source is
#    touched to make cargo rebuild the workspace crates. Debug info is stripped (symbols stay, for backtraces).
COPY . .
RUN find . -path ./target -prune -o -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p llm-gateway --bin llm-gateway \
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
