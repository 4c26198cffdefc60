#!/usr/bin/env bash
# Benchmarks (docs/benchmarks.md). Never part of `make test`: they take minutes and want an otherwise idle machine.
#
#   scripts/bench.sh quick   # `make bench`: criterion with short measurement times, then the load generator at
#                            # concurrency 1 and 100 (paced 64 × 20 ms), a burst-mode run and long bursts (4 096
#                            # chunks per stream), the cancel latency per protocol; under 5 minutes once built
#   scripts/bench.sh full    # `make bench-full`: criterion defaults, concurrency 1, 100, 1 000 and 5 000, burst mode
#   scripts/bench.sh processor  # `make bench-processor`: the processor benchmark (procbench) alone, at 200 and 500
#                               # concurrent sessions
#   scripts/bench.sh peers   # `make bench-peers` (after scripts/peers.sh): the peers (LiteLLM, Portkey) beside the
#                            # gateway in one load-generator run, concurrency 1 and 100
#
# full also ends with the peers run (concurrency 1, 100 and 1 000) when scripts/peers.sh installed them.
#
# quick and full end with the processor benchmark too (quick: 1, 50 and 200 sessions; full: 200 and 500). It needs
# `redis-server` on PATH (it starts a private one on a free port; BENCH_REDIS_SERVER names another binary).
#
# Results go to stdout and to target/bench/ (criterion's own reports are in target/criterion/).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quick}
out=target/bench
mkdir -p "$out"

# The load generator holds two sockets per stream; children inherit the limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# The processor benchmark: sessions through session-processor + llm-gateway + a private Redis, beside direct gateway
# streams in the same run (docs/benchmarks.md, "Processor benchmark").
run_procbench() {
  local plan=$1 label=$2
  echo "== processor benchmark: paced 64 × 20 ms, plan $plan (sessions x rounds)"
  target/release/procbench --plan "$plan" --chunks 64 --interval-ms 20 \
    --redis-server "${BENCH_REDIS_SERVER:-redis-server}" --json "$out/procbench-$label.json" \
    | tee "$out/procbench-$label.md"
}

if [ "$mode" = processor ]; then
  echo "== building (release)"
  cargo build --release --quiet -p llm-gateway -p fake-provider -p session-processor -p bench --bins
  run_procbench "${BENCH_PROC_PLAN:-1x5,200x3,500x2}" processor
  echo "== done: $out/"
  exit 0
fi

# The peers scripts/peers.sh installed (docs/benchmarks.md, "Peers"); loadgen starts them itself. One run: direct,
# floor, gateway over gRPC and over its HTTP front door (Chat Completions and Responses), and the peers interleaved, so the ratios compare like with
# like (the peers speak the front door's protocol).
peer_paths=""
[ -f .tools/peers/litellm/stamp ] && peer_paths="$peer_paths,litellm"
[ -f .tools/peers/portkey/stamp ] && peer_paths="$peer_paths,portkey"
run_peers() {
  local plan=$1 label=$2
  if [ -z "$peer_paths" ]; then
    echo "== peers: none installed under .tools/peers (run scripts/peers.sh); skipped"
    return 0
  fi
  echo "== load generator: peers beside the gateway, paced 64 × 20 ms, plan $plan"
  target/release/loadgen --plan "$plan" --chunks 64 --interval-ms 20 --stream-timeout-s 60 \
    --paths "direct,floor,gateway,gateway-http,gateway-responses$peer_paths" --json "$out/loadgen-peers-$label.json" \
    | tee "$out/loadgen-peers-$label.md"
}

if [ "$mode" = peers ]; then
  echo "== building (release)"
  cargo build --release --quiet -p llm-gateway -p fake-provider -p bench --bins
  run_peers "${BENCH_PEERS_PLAN:-1x10,100x1}" peers
  echo "== done: $out/"
  exit 0
fi

echo "== building (release)"
cargo build --release --quiet -p llm-gateway -p fake-provider -p bench --bins
cargo bench --quiet -p bench --no-run

case "$mode" in
  quick)
    export BENCH_QUICK=1
    plan=${BENCH_PLAN:-1x10,100x1}
    burst_plan=${BENCH_BURST_PLAN:-100x1}
    long_plan=${BENCH_LONG_PLAN:-1x3,4x2}
    proc_plan=${BENCH_PROC_PLAN:-1x3,50x1,200x1}
    cancel_rounds=${BENCH_CANCEL_ROUNDS:-50}
    ;;
  full)
    unset BENCH_QUICK
    plan=${BENCH_PLAN:-1x60,100x3,1000x2,5000x1}
    burst_plan=${BENCH_BURST_PLAN:-100x3,1000x1}
    long_plan=${BENCH_LONG_PLAN:-1x10,4x5}
    proc_plan=${BENCH_PROC_PLAN:-1x10,200x3,500x2}
    cancel_rounds=${BENCH_CANCEL_ROUNDS:-200}
    ;;
  *) echo "usage: $0 [quick|full|processor|peers]"; exit 2 ;;
esac

echo "== criterion micro-benchmarks ($mode)"
cargo bench --quiet -p bench --bench decode --bench processor 2>&1 | grep -v '^$' | tee "$out/criterion-$mode.txt"

echo "== load generator: paced 64 × 20 ms, plan $plan"
target/release/loadgen --plan "$plan" --chunks 64 --interval-ms 20 --json "$out/loadgen-paced-$mode.json" \
  | tee "$out/loadgen-paced-$mode.md"

echo "== load generator: burst (no pacing), plan $burst_plan"
target/release/loadgen --plan "$burst_plan" --chunks 64 --interval-ms 0 --json "$out/loadgen-burst-$mode.json" \
  | tee "$out/loadgen-burst-$mode.md"

# Long bursts: 4 096 chunks per stream, so the per-stream work (connect, request, headers) is spread over many events
# and CPU per text delta is the per-event path (read, parse, decode, encode, write) of each relay.
echo "== load generator: long bursts (4 096 chunks, no pacing), plan $long_plan"
target/release/loadgen --plan "$long_plan" --per-worker 3 --chunks 4096 --interval-ms 0 \
  --json "$out/loadgen-longburst-$mode.json" | tee "$out/loadgen-longburst-$mode.md"

# Cancel latency per protocol: the caller's cancel to the provider's connection closed (docs/benchmarks.md, "Cancel
# latency").
echo "== cancel latency, $cancel_rounds rounds per protocol"
target/release/cancelbench --rounds "$cancel_rounds" | tee "$out/cancelbench-$mode.md"

cargo build --release --quiet -p session-processor --bin session-processor
run_procbench "$proc_plan" "$mode"

if [ "$mode" = full ]; then
  run_peers "${BENCH_PEERS_PLAN:-1x30,100x3,1000x1}" full
fi

echo "== done: $out/"
