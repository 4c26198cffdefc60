#!/usr/bin/env bash
# Makes sure `redis-server` is installed, for `make demo` and `make up`: as root on Debian/Ubuntu it installs the
# distribution's package (saying so first); otherwise it prints the exact command and fails.
set -euo pipefail
command -v redis-server >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "redis-server is missing: installing Debian's redis-server package (apt-get install -y redis-server)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
  # The package may start a system-wide service; the demo runs its own private Redis and needs none.
  command -v redis-server >/dev/null && exit 0
fi
echo "redis-server is needed. Install it with:"
echo "  sudo apt-get install -y redis-server      # Debian, Ubuntu"
echo "(or set REDIS_URL to a Redis you already run)"
exit 1
