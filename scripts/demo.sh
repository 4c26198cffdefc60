#!/usr/bin/env bash
# Builds and runs the whole product locally: Redis, the demo provider, llm-gateway and session-processor, then sends
# a prompt through them with the `sessions` CLI, which shows the conversation live (text, the tool call, usage).
# No API key needed; with OPENAI_API_KEY or ANTHROPIC_API_KEY set, the same prompt goes to the real provider.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -n "${REDIS_URL:-}" ] || ./scripts/need-redis.sh
./scripts/ports-free.sh 50151 50152 $([ -z "${REDIS_URL:-}" ] && echo "${DEMO_REDIS_PORT:-6391}")
cargo build --quiet --bin llm-gateway --bin fake-provider --bin session-processor --bin sessions
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened"; return 1; }

# Redis, private to the demo (no persistence), unless REDIS_URL points elsewhere.
if [ -z "${REDIS_URL:-}" ]; then
  redis_port=${DEMO_REDIS_PORT:-6391}
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
  pids+=($!)
  wait_port "$redis_port"
  export REDIS_URL="redis://127.0.0.1:$redis_port"
fi

# The demo provider: a local, clearly fake OpenAI-compatible server that asks for a `get_time` tool, then answers.
target/debug/fake-provider --listen 127.0.0.1:0 --scenario demo >"$work/fake.out" 2>"$work/fake.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q "listening on" "$work/fake.out" 2>/dev/null && break; sleep 0.05; done
fake_url=$(sed -n 's/^listening on //p' "$work/fake.out" | head -1)
[ -n "$fake_url" ] || { echo "demo provider did not start"; cat "$work/fake.err"; exit 1; }

gateway_token="gw-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
processor_token="sp-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
GATEWAY_AUTH_TOKENS="$gateway_token" DEMO_BASE_URL="$fake_url/v1" RUST_LOG=${RUST_LOG:-warn} \
  target/debug/llm-gateway --config deploy/gateway.demo.toml 2>"$work/gateway.err" &
pids+=($!)
wait_port 50151

mkdir -p "$work/workspaces"
PROCESSOR_AUTH_TOKENS="$processor_token" GATEWAY_TOKEN="$gateway_token" PROCESSOR_WORKSPACE_ROOT="$work/workspaces" \
  RUST_LOG=${RUST_LOG:-warn} target/debug/session-processor --config deploy/processor.demo.toml 2>"$work/processor.err" &
pids+=($!)
wait_port 50152

model=${DEMO_MODEL:-demo/scripted}
if [ -z "${DEMO_MODEL:-}" ]; then
  if [ -n "${ANTHROPIC_API_KEY:-}" ]; then model=anthropic/claude-haiku-4-5; fi
  if [ -n "${OPENAI_API_KEY:-}" ]; then model=openai/gpt-4o-mini; fi
fi
if [ "$model" = demo/scripted ]; then
  echo "(demo provider: a local fake OpenAI-compatible server; set OPENAI_API_KEY or ANTHROPIC_API_KEY to use a real one)"
fi
export PROCESSOR_ADDR=127.0.0.1:50152 PROCESSOR_TOKEN="$processor_token"
fail() { echo "--- gateway log"; cat "$work/gateway.err"; echo "--- processor log"; cat "$work/processor.err"; exit 1; }
session=$(target/debug/sessions create --model "$model" --workspace demo) || fail
echo "[session $session]"
# --auto allows the demo's `write` (its agent asks before writing) without a question at the terminal.
target/debug/sessions prompt "$session" "${1:-What time is it in UTC?}" --time-tool --auto yes || fail
echo "--- what the session changed in its workspace:"
target/debug/sessions diff "$session" --patch || fail
echo "--- persisted in Redis:"
target/debug/sessions messages "$session" || fail
