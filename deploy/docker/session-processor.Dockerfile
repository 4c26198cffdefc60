# syntax=docker/dockerfile:1
# session-processor (and the `sessions` CLI): runs LLM sessions with tools through llm-gateway, persisted in Redis.
#
#   docker build -f deploy/docker/session-processor.Dockerfile -t session-processor .      # from the repository root
#
# Runtime is debian:bookworm-slim rather than distroless because the built-in `bash` tool runs `/bin/sh -c` in the
# session's workspace (denied by default, but an agent may allow it) and model-written commands expect coreutils;
# bubblewrap builds its sandbox (docs/operations.md, "Tool sandbox": under the default seccomp profile of a container
# runtime the namespaces are refused and bash is disabled, unless [tools.bash] confinement = "weak").
# tini is PID 1 so that stray processes of those commands are reaped. git takes the workspace snapshots behind patch
# parts, session summaries and GetDiff (kept under the workspace root's `@snapshots`, never inside a workspace);
# without it sessions still run, only without diffs. Runs as uid 65532.
ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# 1. Reduce the workspace to manifests, the lockfile and stub targets (deploy/docker/recipe.sh).
FROM ${RUST_IMAGE} AS planner
WORKDIR /src
COPY . .
RUN sh deploy/docker/recipe.sh /recipe

# 2. Build the dependencies from the recipe: this layer is reused until a Cargo.toml or Cargo.lock changes.
FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY --from=planner /recipe/ ./
RUN cargo build --release --locked -p session-processor --bin session-processor --bin sessions

# 3. Build the real crate (sources touched: the stubs above are newer than their timestamps); strip debug info.
COPY . .
RUN find . -path ./target -prune -o -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p session-processor --bin session-processor --bin sessions \
 && mkdir /out \
 && objcopy --strip-debug target/release/session-processor /out/session-processor \
 && objcopy --strip-debug target/release/sessions /out/sessions

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates git tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/session-processor --shell /usr/sbin/nologin nonroot \
 && mkdir -p /var/lib/session-processor/workspaces \
 && chown -R 65532:65532 /var/lib/session-processor
COPY --from=builder /out/ /usr/local/bin/
COPY deploy/docker/session-processor.toml /etc/session-processor/processor.toml
ENV PROCESSOR_CONFIG=/etc/session-processor/processor.toml
USER 65532:65532
WORKDIR /var/lib/session-processor
# 50052: gRPC (SessionService, grpc.health.v1, reflection).
EXPOSE 50052 9465
# No HEALTHCHECK: Kubernetes probes grpc.health.v1 natively (`grpc: {port: 50052}`, no token needed).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/session-processor"]
