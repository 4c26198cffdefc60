#!/usr/bin/env bash
# Usage: scripts/ports-free.sh PORT...: fails, naming the first port already in use on 127.0.0.1 and what most likely
# holds it, so `make demo` or `make up` beside a running stack stops before starting anything.
set -euo pipefail
for port in "$@"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    if [ -f "$(dirname "$0")/../.tools/up/pids" ]; then
      echo "port $port is in use: 'make up' is running; 'make down' stops it" >&2
    else
      echo "port $port on 127.0.0.1 is in use by another process; stop it first" >&2
    fi
    exit 1
  fi
done
