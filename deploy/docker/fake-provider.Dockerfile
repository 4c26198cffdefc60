# syntax=docker/dockerfile:1
# The demo provider: shared/fake-provider, a local *fake* OpenAI-compatible server with scripted answers (no model,
# no key). For the compose demo and load tests only; never point production traffic at it.
#
#   docker build -f deploy/docker/fake-provider.Dockerfile -t fake-provider .      # from the repository root
#
# `--scenario demo` (default here) asks for a `get_time` tool call, then answers; `paced` and `burst` stream
# `--chunks` text chunks for benchmarks.
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

# 1. The recipe, pruned to what fake-provider needs.
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json --bin fake-provider

# 2. The dependencies, from the recipe alone (the cached layer).
FROM chef AS builder
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json -p fake-provider --bin fake-provider

# 3. The real crates (cook removed its dummy builds of them, so they are rebuilt from the sources); debug info
#    stripped (symbols stay, for backtraces).
COPY . .
RUN cargo build --release --locked -p fake-provider --bin fake-provider \
 && objcopy --strip-debug target/release/fake-provider /fake-provider

FROM ${RUNTIME_IMAGE}
COPY --from=builder /fake-provider /usr/local/bin/fake-provider
USER 65532:65532
EXPOSE 8089
ENTRYPOINT ["/usr/local/bin/fake-provider"]
CMD ["--listen", "0.0.0.0:8089", "--scenario", "demo"]
