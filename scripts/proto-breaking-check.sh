#!/usr/bin/env bash
# Proves `buf breaking` (make proto-lint) catches breaking changes against the released API image: on a copy of
# proto/ and buf.yaml it checks that the unchanged copy passes, then that each of a few breaking edits fails with
# buf's message naming what broke. Usage: proto-breaking-check.sh BUF IMAGE
set -euo pipefail
buf=$(realpath "$1")
image=$(realpath "$2")
root="$(cd "$(dirname "$0")/.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh() {
  rm -rf "$work/copy" && mkdir -p "$work/copy"
  cp -r "$root/proto" "$root/buf.yaml" "$work/copy/"
}

fresh
(cd "$work/copy" && "$buf" breaking --against "$image") || { echo "proto-breaking-check: the unchanged copy fails"; exit 1; }

# Each case: a sed edit of one file, and the message buf must print.
check() {
  local file=$1 edit=$2 expected=$3
  fresh
  sed -i "$edit" "$work/copy/proto/$file"
  if cmp -s "$root/proto/$file" "$work/copy/proto/$file"; then
    echo "proto-breaking-check: the edit '$edit' changed nothing in $file (update this check)"; exit 1
  fi
  local out
  if out=$(cd "$work/copy" && "$buf" breaking --against "$image" 2>&1); then
    echo "proto-breaking-check: buf breaking accepted a breaking edit of $file ($edit)"; exit 1
  fi
  grep -qF "$expected" <<<"$out" || { echo "proto-breaking-check: expected '$expected', buf said:"; echo "$out"; exit 1; }
  echo "proto-breaking-check: caught: $expected"
}

check llm/sessions/v1/sessions.proto 's/^  string title = 2;/  int64 title = 2;/' \
  'Field "2" with name "title" on message "Session" changed type from "string" to "int64".'
check llm/sessions/v1/sessions.proto '/^  string idempotency_key = 7;/d' \
  'Previously present field "7" with name "idempotency_key" on message "PromptRequest" was deleted.'
check llm/gateway/v1/gateway.proto 's/^  rpc Generate(/  rpc GenerateOnce(/' \
  'Previously present RPC "Generate" on service "GatewayService" was deleted.'
