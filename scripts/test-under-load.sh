#!/usr/bin/env bash
# Runs the Rust test suite N times in a row (default 10) while another process keeps one core busy, and stops at
# the first failing run. Checks that the suite fails only for a reason, not for a loaded machine's timing
# (docs/architecture.md, "Testing"). Usage: scripts/test-under-load.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"

# One core kept busy for the whole run: a shell loop that never sleeps.
( while :; do :; done ) &
busy=$!
trap 'kill "$busy" 2>/dev/null || true' EXIT

cargo nextest run --workspace --no-run
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if ! cargo nextest run --workspace --no-fail-fast >"target/test-under-load-$i.log" 2>&1; then
    echo "run $i of $runs failed (target/test-under-load-$i.log):"
    grep -E '^\s+FAIL' "target/test-under-load-$i.log" | sort -u
    exit 1
  fi
  echo "run $i of $runs passed in $(( $(date +%s) - start )) s: $(grep -E 'Summary' "target/test-under-load-$i.log" | tail -1)"
done
echo "$runs runs in a row passed with one core busy"
