#!/usr/bin/env bash
# Makes sure `redis-server` is installed, for `make demo` and `make up`: as root on Debian/Ubuntu it installs the
# distribution's package (saying so first); otherwise it prints the exact command and fails (scripts/apt-install.sh).
set -euo pipefail
command -v redis-server >/dev/null && exit 0
if ! "$(dirname "$0")/apt-install.sh" "redis-server, for a private Redis" redis-server; then
  echo "(or set REDIS_URL to a Redis you already run)" >&2
  exit 1
fi
# The package may start a system-wide service; the demo runs its own private Redis and needs none.
command -v redis-server >/dev/null
