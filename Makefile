# The verbs a newcomer needs. `make demo` runs the product locally; `make test` runs every test.
CARGO ?= cargo
TOOLS := .tools
BUF := $(TOOLS)/node_modules/.bin/buf

.PHONY: demo demo-gateway up down run test test-deps test-rust shape lint fmt clippy proto-lint proto-release deploy-lint build bench bench-full bench-processor bench-peers fuzz fuzz-ci fuzz-smoke clean

demo run:
	./scripts/demo.sh

demo-gateway:
	./scripts/demo-gateway.sh

# The whole stack (Redis, demo provider, llm-gateway, session-processor) left running for your own clients; prints
# the addresses, tokens and environment lines. `make down` stops it.
up:
	./scripts/up.sh

down:
	./scripts/down.sh

build:
	$(CARGO) build --workspace --all-targets

# First what the tests need (scripts/install-test-deps.sh: as root on Debian/Ubuntu it installs what is missing, saying
# so first; otherwise it prints the commands and stops), so a fresh machine needs nothing but `make test`.
test: test-deps
	$(MAKE) shape proto-lint deploy-lint test-rust

test-deps:
	./scripts/install-test-deps.sh

# The shape rules (docs/architecture.md, "Shape"): no source file over 800 lines, no function over 80, no import
# cycle between a crate's modules (tests exempt); and the processor's types small (no type over 25 methods or spread
# over more than 3 files, the files a newcomer reads first within 500 lines; the gateway's largest types printed as a
# report). A second or so; first, so a breach fails before the long suite.
shape:
	python3 scripts/shape.py
	python3 scripts/type_sizes.py

# Against REDIS_URL's Redis, the one on 127.0.0.1:6379, or a private one for the run (scripts/with-redis.sh).
test-rust:
	./scripts/with-redis.sh $(CARGO) nextest run --workspace --no-fail-fast

lint: shape proto-lint clippy
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# Benchmarks (docs/benchmarks.md); never part of `test`. `bench` is the quick mode (under 5 minutes once built),
# `bench-full` adds 1 000 and 5 000 concurrent streams and criterion's default measurement times.
bench:
	./scripts/bench.sh quick

bench-full:
	./scripts/bench.sh full

# The peers (LiteLLM's proxy, Portkey's gateway) installed into .tools/peers, then measured beside the gateway at
# concurrency 1 and 100 in one load-generator run (docs/benchmarks.md, "Peers").
bench-peers:
	./scripts/peers.sh
	./scripts/bench.sh peers

# The processor benchmark alone (procbench: 200 and 500 concurrent sessions through session-processor + llm-gateway +
# a private redis-server, which must be installed); `bench` and `bench-full` run a version of it too.
bench-processor:
	./scripts/bench.sh processor

# Fuzzing (docs/gateway.md "Fuzzing"; cargo-fuzz, outside the workspace; never part of `test`, which replays the
# seed corpus on stable). `fuzz` runs every target for 10 million executions (a few hours on one idle core);
# `fuzz-smoke` for FUZZ_SECONDS (default 20) each, after a release build of fuzz/ (16-17 CPU-minutes from clean,
# about 6 wall-minutes after a gateway change on 2 shared cores; docs/benchmarks.md "Fuzzing"); `fuzz-ci`, which
# .ci/run runs, for FUZZ_SECONDS (default 10) each after an unoptimised build (about 2.5 wall-minutes from clean).
fuzz:
	./scripts/fuzz.sh long $(FUZZ_RUNS)

fuzz-ci:
	./scripts/fuzz.sh ci $(FUZZ_SECONDS)

fuzz-smoke:
	./scripts/fuzz.sh smoke $(FUZZ_SECONDS)

$(BUF):
	mkdir -p $(TOOLS) && cd $(TOOLS) && npm install --silent --no-audit --no-fund --prefix . @bufbuild/buf@1.75.0

# The API as last released (docs/operations.md, "API compatibility"): `buf breaking` compares proto/ with it, and
# scripts/proto-breaking-check.sh proves the comparison catches breaking edits. `make proto-release` refreshes it,
# as the last step of a release.
RELEASED_API := release/api-image.json

proto-lint: $(BUF)
	$(BUF) lint
	$(BUF) breaking --against $(RELEASED_API)
	./scripts/proto-breaking-check.sh $(BUF) $(RELEASED_API)

proto-release: $(BUF)
	$(BUF) build --exclude-source-info -o -#format=json | python3 -m json.tool --indent 1 >$(RELEASED_API).new
	mv $(RELEASED_API).new $(RELEASED_API)

# The kustomize overlays and the Helm chart rendered and validated (schema, strict), the ServiceMonitors and the Grafana
# dashboard, compose.yaml, and the deploy files against what the binaries read (deploy/README.md, "Validation").
deploy-lint:
	./deploy/validate.sh

clean:
	$(CARGO) clean
	rm -rf $(TOOLS)
