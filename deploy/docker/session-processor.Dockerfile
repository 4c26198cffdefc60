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

# 1. The recipe.
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

# 2. The dependencies, from the recipe alone (the cached layer).
FROM chef AS builder
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json -p session-processor --bin session-processor --bin sessions

# 3. The real crates (cook removed its dummy builds of them, so they are rebuilt from the sources); debug info
#    stripped (symbols stay, for backtraces).
COPY . .
RUN cargo build --release --locked -p session-processor --bin session-processor --bin sessions \
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
