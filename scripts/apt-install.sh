#!/usr/bin/env bash
# Installs the Debian packages a `make` target needs (`make demo`, `make up`, `make test`), the one way all of them
# do it: as root on Debian or Ubuntu it says which packages and for what, then installs them; otherwise it prints
# the exact command and exits 1, so nothing is installed behind a developer's back.
#
#   scripts/apt-install.sh "<what needs them>" PACKAGE...    # nothing to do without packages
set -euo pipefail
what=$1
shift
[ $# -gt 0 ] || exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "$what: installing Debian packages: $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
  exit 0
fi
echo "$what: Debian packages are missing. Install them with:" >&2
echo "  sudo apt-get update && sudo apt-get install -y $*      # Debian, Ubuntu" >&2
exit 1
