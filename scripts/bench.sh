#!/usr/bin/env bash
# Benchmarks (docs/benchmarks.md). Never part of `make test`: they take minutes and want an otherwise idle machine.
#
#   scripts/bench.sh quick   # `make bench`: criterion with short measurement times, then the load generator at
#                            # concurrency 1 and 100 (paced 64 × 20 ms) and a burst-mode run; under 5 minutes once built
#   scripts/bench.sh full    # `make bench-full`: criterion defaults, concurrency 1, 100, 1 000 and 5 000, burst mode
#
# Results go to stdout and to target/bench/ (criterion's own reports are in target/criterion/).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quick}
out=target/bench
mkdir -p "$out"

# The load generator holds two sockets per stream; children inherit the limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

echo "== building (release)"
cargo build --release --quiet -p llm-gateway -p fake-provider -p bench --bins
cargo bench --quiet -p bench --no-run

case "$mode" in
  quick)
    export BENCH_QUICK=1
    plan=${BENCH_PLAN:-1x10,100x1}
    burst_plan=${BENCH_BURST_PLAN:-100x1}
    ;;
  full)
    unset BENCH_QUICK
    plan=${BENCH_PLAN:-1x60,100x3,1000x2,5000x1}
    burst_plan=${BENCH_BURST_PLAN:-100x3,1000x1}
    ;;
  *) echo "usage: $0 [quick|full]"; exit 2 ;;
esac

echo "== criterion micro-benchmarks ($mode)"
cargo bench --quiet -p bench --bench decode --bench processor 2>&1 | grep -v '^$' | tee "$out/criterion-$mode.txt"

echo "== load generator: paced 64 × 20 ms, plan $plan"
target/release/loadgen --plan "$plan" --chunks 64 --interval-ms 20 --json "$out/loadgen-paced-$mode.json" \
  | tee "$out/loadgen-paced-$mode.md"

echo "== load generator: burst (no pacing), plan $burst_plan"
target/release/loadgen --plan "$burst_plan" --chunks 64 --interval-ms 0 --json "$out/loadgen-burst-$mode.json" \
  | tee "$out/loadgen-burst-$mode.md"

echo "== done: $out/"
