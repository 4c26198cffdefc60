#!/usr/bin/env bash
# Installs the peers the load generator measures beside the gateway (docs/benchmarks.md, "Peers") into the gitignored
# .tools/peers/:
#
#   .tools/peers/litellm/   a Python venv with LiteLLM's proxy (`litellm[proxy]`), from PyPI
#   .tools/peers/portkey/   Portkey's gateway (`@portkey-ai/gateway`), from npm, with `@hono/node-server` pinned to
#                           1.13.5 (with a newer one every completion through Portkey fails)
#
# Idempotent (a stamp file per peer records what was installed; a matching stamp skips the install) and quiet on
# success. Nothing secret is written: the load generator makes a new LiteLLM master key for every run.
#
#   scripts/peers.sh            # both
#   scripts/peers.sh litellm    # one of them
#
# Versions can be overridden (LITELLM_VERSION=…, PORTKEY_VERSION=…), but the figures in docs/benchmarks.md are for
# the pins below.
set -euo pipefail
cd "$(dirname "$0")/.."

LITELLM_VERSION=${LITELLM_VERSION:-1.108.0}
PORTKEY_VERSION=${PORTKEY_VERSION:-1.15.2}
HONO_NODE_SERVER_VERSION=1.13.5

root=.tools/peers
mkdir -p "$root"

# Prints why an install failed: a registry that cannot be reached is said so plainly, anything else shows the log.
fail() {
  local what=$1 registry=$2 log=$3
  if grep -qiE 'ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network|Connection(Error| refused| reset)|Max retries exceeded|Temporary failure in name resolution|Could not find a version|No matching distribution|timed out' "$log"; then
    echo "peers: could not install $what: the $registry registry is unreachable or does not serve it (log: $log)" >&2
    grep -iE 'ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONN|ENETUNREACH|network|Connection|Max retries|resolution|No matching|Could not find|timed out' "$log" | head -3 >&2
  else
    echo "peers: could not install $what (log: $log):" >&2
    tail -20 "$log" >&2
  fi
  exit 1
}

install_litellm() {
  local dir=$root/litellm stamp="litellm[proxy]==$LITELLM_VERSION"
  if [ -x "$dir/venv/bin/litellm" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  command -v python3 >/dev/null || { echo "peers: python3 is needed for LiteLLM" >&2; exit 1; }
  mkdir -p "$dir"
  rm -f "$dir/stamp"
  local log=$dir/install.log
  {
    [ -x "$dir/venv/bin/python" ] || python3 -m venv "$dir/venv"
    "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$stamp"
  } >"$log" 2>&1 || fail "LiteLLM $LITELLM_VERSION" PyPI "$log"
  echo "$stamp" >"$dir/stamp"
}

install_portkey() {
  local dir=$root/portkey stamp="@portkey-ai/gateway@$PORTKEY_VERSION @hono/node-server@$HONO_NODE_SERVER_VERSION"
  if [ -f "$dir/node_modules/@portkey-ai/gateway/build/start-server.js" ] \
    && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  command -v npm >/dev/null || { echo "peers: node and npm are needed for Portkey's gateway" >&2; exit 1; }
  mkdir -p "$dir"
  rm -f "$dir/stamp"
  # `overrides` pins @hono/node-server for the gateway's own dependency too, not just at the top level.
  cat >"$dir/package.json" <<EOF
{
  "name": "bench-peer-portkey",
  "private": true,
  "description": "Portkey's gateway for the load generator (scripts/peers.sh).",
  "dependencies": {
    "@portkey-ai/gateway": "$PORTKEY_VERSION",
    "@hono/node-server": "$HONO_NODE_SERVER_VERSION"
  },
  "overrides": {
    "@hono/node-server": "$HONO_NODE_SERVER_VERSION"
  }
}
EOF
  local log=$dir/install.log
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error) >"$log" 2>&1 \
    || fail "Portkey's gateway $PORTKEY_VERSION" npm "$log"
  local got
  got=$(node -p "require('./$dir/node_modules/@hono/node-server/package.json').version" 2>/dev/null || true)
  if [ "$got" != "$HONO_NODE_SERVER_VERSION" ]; then
    echo "peers: @hono/node-server is $got, not $HONO_NODE_SERVER_VERSION, under $dir" >&2
    exit 1
  fi
  echo "$stamp" >"$dir/stamp"
}

case "${1:-all}" in
  all) install_litellm; install_portkey ;;
  litellm) install_litellm ;;
  portkey) install_portkey ;;
  *) echo "usage: $0 [all|litellm|portkey]" >&2; exit 2 ;;
esac
