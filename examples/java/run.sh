#!/usr/bin/env bash
# Runs the example build.sh compiled into $1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: run.sh OUT_DIR}"
exec java -cp "$out/classes:$("$here/classpath.sh")" dev.llm.examples.Conversation
