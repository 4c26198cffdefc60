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

FROM ${RUST_IMAGE} AS planner
WORKDIR /src
COPY . .
RUN sh deploy/docker/recipe.sh /recipe

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY --from=planner /recipe/ ./
RUN cargo build --release --locked -p fake-provider --bin fake-provider
COPY . .
RUN find . -path ./target -prune -o -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p fake-provider --bin fake-provider \
 && objcopy --strip-debug target/release/fake-provider /fake-provider

FROM ${RUNTIME_IMAGE}
COPY --from=builder /fake-provider /usr/local/bin/fake-provider
USER 65532:65532
EXPOSE 8089
ENTRYPOINT ["/usr/local/bin/fake-provider"]
CMD ["--listen", "0.0.0.0:8089", "--scenario", "demo"]
