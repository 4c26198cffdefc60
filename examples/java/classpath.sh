#!/usr/bin/env bash
# Prints the class path of the example from Debian's jars (/usr/share/java): grpc-java (libgrpc-java), protobuf-java
# (libprotobuf-java), netty (libnetty-java), perfmark (libperfmark-java), guava and the annotations the generated
# code names (libgeronimo-annotation-1.3-spec-java). Fails naming the first jar that is missing.
set -euo pipefail
jars=(grpc-api grpc-core grpc-context grpc-stub grpc-protobuf grpc-protobuf-lite grpc-netty protobuf guava perfmark-api
  geronimo-annotation-1.3-spec netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-common
  netty-handler netty-resolver netty-transport)
cp=""
for j in "${jars[@]}"; do
  f="/usr/share/java/$j.jar"
  [ -f "$f" ] || { echo "missing $f (see examples/README.md for the Debian packages)" >&2; exit 1; }
  cp="$cp${cp:+:}$f"
done
echo "$cp"
