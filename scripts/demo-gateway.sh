#!/usr/bin/env bash
# The gateway alone: the demo provider, llm-gateway, and gateway-demo (a client playing the processor's part) sending a prompt with a tool call
# streamed through them to this terminal. No API key needed; with OPENAI_API_KEY or ANTHROPIC_API_KEY set, the same
# prompt goes to the real provider instead.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet --bin llm-gateway --bin gateway-demo --bin fake-provider
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The demo provider: a local, clearly fake OpenAI-compatible server that answers with a tool call, then with text.
target/debug/fake-provider --listen 127.0.0.1:0 --scenario demo >"$work/fake.out" 2>"$work/fake.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q "listening on" "$work/fake.out" 2>/dev/null && break; sleep 0.05; done
fake_url=$(sed -n 's/^listening on //p' "$work/fake.out" | head -1)
[ -n "$fake_url" ] || { echo "demo provider did not start"; cat "$work/fake.err"; exit 1; }

token="demo-token-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
port=${DEMO_GATEWAY_PORT:-50151}
GATEWAY_AUTH_TOKENS="$token" GATEWAY_LISTEN="127.0.0.1:$port" DEMO_BASE_URL="$fake_url/v1" \
  RUST_LOG=${RUST_LOG:-warn} target/debug/llm-gateway --config deploy/gateway.demo.toml 2>"$work/gateway.err" &
pids+=($!)
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done

model=${DEMO_MODEL:-demo/scripted}
if [ -z "${DEMO_MODEL:-}" ]; then
  if [ -n "${ANTHROPIC_API_KEY:-}" ]; then model=anthropic/claude-haiku-4-5; fi
  if [ -n "${OPENAI_API_KEY:-}" ]; then model=openai/gpt-4o-mini; fi
fi
if [ "$model" = demo/scripted ]; then
  echo "(demo provider: a local fake OpenAI-compatible server; set OPENAI_API_KEY or ANTHROPIC_API_KEY to use a real one)"
fi
target/debug/gateway-demo --addr "http://127.0.0.1:$port" --token "$token" --model "$model" "${1:-What time is it in UTC?}" \
  || { echo "--- gateway log"; cat "$work/gateway.err"; exit 1; }
