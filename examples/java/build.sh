#!/usr/bin/env bash
# Generates the Java code from the repository's protos and compiles it with the example into $1/classes.
# Needs protoc (protobuf-compiler), the grpc-java generator (protobuf-compiler-grpc-java-plugin), a JDK, and the jars
# classpath.sh lists.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: build.sh OUT_DIR}"
cp="$("$here/classpath.sh")"
rm -rf "$out/gen" "$out/classes"
mkdir -p "$out/gen" "$out/classes"
protoc -I "$here/../../proto" \
  --java_out="$out/gen" \
  --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" --grpc-java_out="$out/gen" \
  llm/sessions/v1/sessions.proto llm/gateway/v1/gateway.proto llm/gateway/v1/hooks.proto llm/gateway/v1/keys.proto
find "$out/gen" "$here/src" -name '*.java' >"$out/sources"
javac -nowarn -d "$out/classes" -cp "$cp" @"$out/sources"
