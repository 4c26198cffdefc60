#!/usr/bin/env bash
# `make down`: stops every process `make up` started (their pids are in .tools/up/pids) and removes its state.
set -euo pipefail
cd "$(dirname "$0")/.."
state=.tools/up
if [ ! -f "$state/pids" ]; then
  echo "nothing is up"
  exit 0
fi
pids=$(cat "$state/pids")
for p in $pids; do kill "$p" 2>/dev/null || true; done
# Each exits on SIGTERM (the services drain first); bounded wait, then SIGKILL what is left.
for _ in $(seq 1 100); do
  alive=""
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
  [ -z "$alive" ] && break
  sleep 0.1
done
for p in ${alive:-}; do kill -9 "$p" 2>/dev/null || true; done
rm -rf "$state"
echo "stopped: $(echo $pids | wc -w) processes; nothing of the stack is left running"
