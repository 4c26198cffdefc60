# The verbs a newcomer needs. `make demo` runs the product locally; `make test` runs every test.
CARGO ?= cargo
TOOLS := .tools
BUF := $(TOOLS)/node_modules/.bin/buf

.PHONY: demo demo-gateway run test test-rust lint fmt clippy proto-lint build bench clean

demo run:
	./scripts/demo.sh

demo-gateway:
	./scripts/demo-gateway.sh

build:
	$(CARGO) build --workspace --all-targets

test: proto-lint test-rust

test-rust:
	$(CARGO) nextest run --workspace --no-fail-fast

lint: proto-lint clippy
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

$(BUF):
	mkdir -p $(TOOLS) && cd $(TOOLS) && npm install --silent --no-audit --no-fund --prefix . @bufbuild/buf@1.75.0

proto-lint: $(BUF)
	$(BUF) lint

clean:
	$(CARGO) clean
	rm -rf $(TOOLS)
