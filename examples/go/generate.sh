#!/usr/bin/env bash
# Generates the Go packages from the repository's protos into this module (./sessions/v1, ./gateway/v1), or into
# $1/llm/... for a GOPATH build (what tests/tests/clients_go_java.rs does). Needs protoc, protoc-gen-go and
# protoc-gen-go-grpc on PATH (Debian: protobuf-compiler protoc-gen-go protoc-gen-go-grpc).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
protos="$here/../../proto"
if [ $# -ge 1 ]; then
  out="$1" opt=paths=import          # $out/llm/sessions/v1/...
else
  out="$here" opt=module=llm         # ./sessions/v1/...
fi
mkdir -p "$out"
protoc -I "$protos" \
  --go_out="$out" --go_opt="$opt" \
  --go-grpc_out="$out" --go-grpc_opt="$opt" \
  llm/sessions/v1/sessions.proto llm/gateway/v1/gateway.proto llm/gateway/v1/hooks.proto llm/gateway/v1/keys.proto
