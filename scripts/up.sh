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
cargo build --quiet --bin llm-gateway --bin fake-provider --bin session-processor --bin sessions --bin trace-view
mkdir -p "$state/workspaces"
: >"$state/pids"

# On any failure before the end, stop what was started.
started=false
trap '$started || ./scripts/down.sh >/dev/null 2>&1 || true' EXIT

wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened (logs in $state)"; return 1; }
# Starts a detached process (its own session, so it outlives this script) and records its pid.
start() { local log=$1; shift; setsid "$@" >"$state/$log.out" 2>"$state/$log.err" </dev/null & echo $! >>"$state/pids"; }

# The HTTP front door and the metrics listeners (override with UP_HTTP_PORT, UP_GATEWAY_METRICS_PORT,
# UP_PROCESSOR_METRICS_PORT).
http_port=${UP_HTTP_PORT:-50180}
gateway_metrics_port=${UP_GATEWAY_METRICS_PORT:-50190}
processor_metrics_port=${UP_PROCESSOR_METRICS_PORT:-50191}
# trace-view: the services' spans over OTLP, printed as trees over HTTP (no Jaeger needed).
otlp_port=${UP_OTLP_PORT:-50194}
traces_port=${UP_TRACES_PORT:-50195}

redis_url=${REDIS_URL:-}
./scripts/ports-free.sh 50151 50152 "$http_port" "$gateway_metrics_port" "$processor_metrics_port" "$otlp_port" "$traces_port" \
  $([ -z "$redis_url" ] && echo "${DEMO_REDIS_PORT:-6391}")
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

start traces target/debug/trace-view --otlp-listen 127.0.0.1:$otlp_port --http-listen 127.0.0.1:$traces_port
wait_port "$traces_port"
# Both services export their spans to it, in batches every half second.
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$otlp_port OTEL_BSP_SCHEDULE_DELAY=500

gateway_token="gw-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
tenant_token="sp-demo-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
operator_token="op-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
# Every door: gRPC, the HTTP front door (OpenAI and Anthropic SDKs) and the metrics listeners.
GATEWAY_AUTH_TOKENS="$gateway_token" DEMO_BASE_URL="$fake_url/v1" RUST_LOG=${RUST_LOG:-info} \
  GATEWAY_HTTP_LISTEN=127.0.0.1:$http_port GATEWAY_METRICS_LISTEN=127.0.0.1:$gateway_metrics_port \
  start gateway target/debug/llm-gateway --config deploy/gateway.demo.toml
wait_port 50151
wait_port "$http_port"
# The demo configuration plus one tenant, `demo`, with a $1 budget, so `sessions spend` and budgets can be tried;
# the operator token sees every tenant (`sessions spend --tenant demo`).
{
  cat deploy/processor.demo.toml
  printf '\n[tenants.demo]\ntokens = ["%s"]\nbudget_usd = 1.0\n' "$tenant_token"
} >"$state/processor.toml"
REDIS_URL="$redis_url" PROCESSOR_OPERATOR_TOKENS="$operator_token" GATEWAY_TOKEN="$gateway_token" \
  PROCESSOR_WORKSPACE_ROOT="$PWD/$state/workspaces" PROCESSOR_METRICS_LISTEN=127.0.0.1:$processor_metrics_port \
  RUST_LOG=${RUST_LOG:-info} start processor target/debug/session-processor --config "$state/processor.toml"
wait_port 50152

# One address format for every client: host:port (gRPC clients in every language take it; the CLI takes it too).
cat >"$state/env" <<ENV
export GATEWAY_ADDR=127.0.0.1:50151
export GATEWAY_TOKEN=$gateway_token
export PROCESSOR_ADDR=127.0.0.1:50152
export PROCESSOR_TOKEN=$tenant_token
export PROCESSOR_OPERATOR_TOKEN=$operator_token
export DEMO_MODEL=demo/scripted
export PATH="$PWD/target/debug:\$PATH"
ENV
# The SDKs' own variables, in a file of their own: sourced into a shell that later runs the stack again, they would
# point the gateway's built-in providers at itself.
cat >"$state/sdk.env" <<ENV
export OPENAI_BASE_URL=http://127.0.0.1:$http_port/v1
export OPENAI_API_KEY=$gateway_token
export ANTHROPIC_BASE_URL=http://127.0.0.1:$http_port
export ANTHROPIC_API_KEY=$gateway_token
ENV
started=true
cat <<MSG
The stack is up (logs in $state/*.err):
  session-processor  gRPC 127.0.0.1:50152   metrics http://127.0.0.1:$processor_metrics_port/metrics
  llm-gateway        gRPC 127.0.0.1:50151   HTTP front door http://127.0.0.1:$http_port/v1   metrics http://127.0.0.1:$gateway_metrics_port/metrics
  traces             http://127.0.0.1:$traces_port/traces   (trace-view: each prompt's trace as a tree; OTLP in on $otlp_port)
  demo provider      $fake_url   (fake OpenAI-compatible; model demo/scripted)
  Redis              $redis_url
Tokens: tenant "demo" (budget \$1) $tenant_token · operator $operator_token · gateway $gateway_token
For a client, in your shell (also puts the \`sessions\` CLI on PATH):
  source $state/env
Then:
  sessions prompt "\$(sessions create --model demo/scripted)" "What time is it?" --time-tool
  sessions spend
  curl -s "http://127.0.0.1:$traces_port/traces?session=<the session id>"   # that prompt's trace tree
The HTTP front door, with curl or any OpenAI / Anthropic SDK (source $state/sdk.env for the SDKs' variables):
  curl -s http://127.0.0.1:$http_port/v1/chat/completions -H "authorization: Bearer $gateway_token" \\
    -H 'content-type: application/json' -d '{"model":"demo/scripted","messages":[{"role":"user","content":"Hi"}]}'
Or an example client (examples/README.md), after 'source $state/env':
  pip install ./clients/python && python3 examples/python/conversation.py
  (cd clients/node && npm ci) && (cd examples/node && npm ci) && node examples/node/conversation.mjs
Stop everything with: make down
MSG
