#!/usr/bin/env bash
# Runs a command (`make test`'s Rust suite) with a Redis to test against: REDIS_URL's when it is set, else the one
# answering on 127.0.0.1:6379 (the tests' default), else a private redis-server started on that port for the
# command's duration, without persistence, and stopped after it. So `make test` needs no Redis started by hand.
#
#   scripts/with-redis.sh COMMAND [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Whether a Redis answers PING on 127.0.0.1:$1 (bash's /dev/tcp: no client needed).
answers() {
  local reply=""
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  read -r -t 2 reply <&3 || true
  exec 3>&-
  [[ $reply == +PONG* ]]
}

if [ -n "${REDIS_URL:-}" ] || answers 6379; then
  exec "$@"
fi
./scripts/need-redis.sh
dir=$(mktemp -d)
redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
redis=$!
trap 'kill "$redis" 2>/dev/null || true; wait "$redis" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  answers 6379 && break
  sleep 0.1
done
answers 6379 || { echo "redis-server did not start:" >&2; cat "$dir/redis.log" >&2; exit 1; }
echo "make test: a private Redis on 127.0.0.1:6379 for this run (stopped after it)"
export REDIS_URL=redis://127.0.0.1:6379
"$@"
