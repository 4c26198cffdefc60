#!/usr/bin/env bash
# `make up`: starts the whole stack on loopback and leaves it running: a private Redis, the demo provider (a local
# fake OpenAI-compatible server), llm-gateway and session-processor. Prints the addresses, the tokens and the
# environment lines a client needs; `make down` (scripts/down.sh) stops everything it started.
# With OPENAI_API_KEY / ANTHROPIC_API_KEY set, the gateway serves those providers too.
set -euo pipefail
cd "$(dirname "$0")/.."

state=.tools/up
if [ -f "$state/pids" ]; then
  echo "the stack is already up (see $state/env); 'make down' stops it"
  exit 1
fi
[ -n "${REDIS_URL:-}" ] || ./scripts/need-redis.sh
cargo build --quiet --bin llm-gateway --bin fake-provider --bin session-processor --bin sessions
mkdir -p "$state/workspaces"
: >"$state/pids"

# On any failure before the end, stop what was started.
started=false
trap '$started || ./scripts/down.sh >/dev/null 2>&1 || true' EXIT

wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened (logs in $state)"; return 1; }
# Starts a detached process (its own session, so it outlives this script) and records its pid.
start() { local log=$1; shift; setsid "$@" >"$state/$log.out" 2>"$state/$log.err" </dev/null & echo $! >>"$state/pids"; }

redis_url=${REDIS_URL:-}
if [ -z "$redis_url" ]; then
  redis_port=${DEMO_REDIS_PORT:-6391}
  start redis redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$PWD/$state"
  wait_port "$redis_port"
  redis_url="redis://127.0.0.1:$redis_port"
fi

start fake target/debug/fake-provider --listen 127.0.0.1:0 --scenario demo
for _ in $(seq 1 100); do grep -q "listening on" "$state/fake.out" 2>/dev/null && break; sleep 0.05; done
fake_url=$(sed -n 's/^listening on //p' "$state/fake.out" | head -1)
[ -n "$fake_url" ] || { echo "the demo provider did not start"; cat "$state/fake.err"; exit 1; }

gateway_token="gw-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
processor_token="sp-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
GATEWAY_AUTH_TOKENS="$gateway_token" DEMO_BASE_URL="$fake_url/v1" RUST_LOG=${RUST_LOG:-info} \
  start gateway target/debug/llm-gateway --config deploy/gateway.demo.toml
wait_port 50151
REDIS_URL="$redis_url" PROCESSOR_AUTH_TOKENS="$processor_token" GATEWAY_TOKEN="$gateway_token" \
  PROCESSOR_WORKSPACE_ROOT="$PWD/$state/workspaces" RUST_LOG=${RUST_LOG:-info} \
  start processor target/debug/session-processor --config deploy/processor.demo.toml
wait_port 50152

cat >"$state/env" <<ENV
export GATEWAY_ADDR=127.0.0.1:50151
export GATEWAY_TOKEN=$gateway_token
export PROCESSOR_ADDR=http://127.0.0.1:50152
export PROCESSOR_TOKEN=$processor_token
export DEMO_MODEL=demo/scripted
ENV
started=true
cat <<MSG
The stack is up (logs in $state/*.err):
  session-processor  127.0.0.1:50152   token $processor_token
  llm-gateway        127.0.0.1:50151   token $gateway_token
  demo provider      $fake_url   (fake OpenAI-compatible; model demo/scripted)
  Redis              $redis_url
For a client, in your shell:
$(sed 's/^/  /' "$state/env")
  (or: source $state/env)
Try: target/debug/sessions prompt "\$(target/debug/sessions create --model demo/scripted)" "What time is it?" --time-tool
Or an example client (examples/README.md), after 'source $state/env':
  pip install ./clients/python && python3 examples/python/conversation.py
  (cd clients/node && npm install) && (cd examples/node && npm install) && node examples/node/conversation.mjs
Stop everything with: make down
MSG
