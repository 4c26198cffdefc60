#!/usr/bin/env bash
# Fuzzing (docs/gateway.md "Fuzzing", figures in docs/benchmarks.md "Fuzzing"). Never part of `make test`, which
# replays the same seed corpus on stable (llm_gateway::adapter::testing::fuzzing's tests).
#
#   scripts/fuzz.sh ci [SECONDS]     # `make fuzz-ci`, run by .ci/run: an unoptimised build (minutes from clean),
#                                    # then every target for SECONDS (default 10) each
#   scripts/fuzz.sh smoke [SECONDS]  # `make fuzz-smoke`: a release build, every target for SECONDS (default 20) each
#   scripts/fuzz.sh long [RUNS]      # `make fuzz`: every target for RUNS executions (default 10 000 000) each;
#                                    # a few hours on one idle core (docs/benchmarks.md "Fuzzing")
#   scripts/fuzz.sh seed             # only (re)write the seed corpus under fuzz/corpus/<target>/
#   FUZZ_TARGETS="sse bedrock" scripts/fuzz.sh long   # a subset
#   FUZZ_ARGS="-max_len=1024 -max_total_time=600" scripts/fuzz.sh long   # more libFuzzer flags
#
# Seeds: every byte-exact provider fixture (shared/fake-provider/fixtures), each prefixed with a few plan bytes
# (the first byte of an input: how the body is cut into reads and which framing limit applies), plus the inputs
# kept under fuzz/regressions/<target>/. Finds go to fuzz/artifacts/<target>/; a crash input belongs in
# fuzz/regressions/<target>/ (the stable test replays it) with a unit test in the decoder that had the bug.
#
# Toolchain: cargo-fuzz, and nightly when installed. Without nightly the script uses stable as is: with
# `--sanitizer none` cargo-fuzz passes rustc only stable flags (`-Cpasses=sancov-module`, `-Cllvm-args=...`,
# `--cfg fuzzing`), which was checked with cargo-fuzz 0.13.2 and rustc 1.95; only a sanitizer needs nightly.
# Without cargo-fuzz it says so and exits 0 for `smoke` (a developer's machine without it) and 1 otherwise.
#
# Builds are optimised (`ci`: unoptimised) with debug assertions and no sanitizer: the gateway forbids unsafe code,
# so AddressSanitizer would only slow the runs; panics, overflows and the harness's assertions are what is hunted. Runs are one job,
# one worker, at nice 19, so they never starve a build sharing the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# The build's profile: cargo-fuzz's default (optimised, with debug assertions), or `--dev` for `ci` (unoptimised);
# `cargo fuzz run` is given it again so that it runs what was built.
PROFILE=()

ALL_TARGETS="sse openai_chat openai_responses anthropic gemini vertex_gemini bedrock"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}
FIX=shared/fake-provider/fixtures

dirs_of() {
  case $1 in
    openai_chat) echo openai_chat azure_chat ;;
    openai_responses) echo openai_responses azure_responses ;;
    anthropic) echo anthropic vertex_anthropic ;;
    gemini) echo gemini ;;
    vertex_gemini) echo vertex_gemini gemini ;;
    bedrock) echo bedrock ;;
    sse) echo openai_chat azure_chat openai_responses azure_responses anthropic vertex_anthropic gemini vertex_gemini selftest ;;
  esac
}

seed() {
  local t=$1 ext=sse dir f plan
  [ "$t" = bedrock ] && ext=es
  mkdir -p "fuzz/corpus/$t"
  for dir in $(dirs_of "$t"); do
    for f in "$FIX/$dir"/*."$ext"; do
      [ -f "$f" ] || continue
      # 0: one read; 7: reads of 1-7 bytes; 0x83: reads of 1-3 bytes under the small framing limit.
      for plan in 000 007 203; do
        { printf "\\$plan"; cat "$f"; } > "fuzz/corpus/$t/seed-$dir-$(basename "$f" ."$ext")-$plan"
      done
    done
  done
  if [ -d "fuzz/regressions/$t" ]; then
    cp fuzz/regressions/"$t"/* "fuzz/corpus/$t/" 2>/dev/null || true
  fi
}

toolchain() {
  if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz); skipping" >&2
    return 1
  fi
  if cargo +nightly --version >/dev/null 2>&1; then
    CARGO=(cargo +nightly)
  else
    echo "fuzz: no nightly toolchain; building with stable (no sanitizer needs none)" >&2
    CARGO=(cargo)
  fi
}

# run TARGET LIBFUZZER_ARGS...: runs at nice 19, one job, one worker (built already). With -jobs libFuzzer writes
# the run's output to fuzz-0.log in its working directory: each target gets its own, fuzz/logs/TARGET/, so targets
# can run side by side; its tail (the final stats) is printed.
run() {
  local t=$1 root status=0
  shift
  root=$(pwd)
  seed "$t"
  mkdir -p "fuzz/logs/$t"
  (cd "fuzz/logs/$t" && nice -n 19 "${CARGO[@]}" fuzz run "${PROFILE[@]}" --fuzz-dir "$root/fuzz" --sanitizer none "$t" \
    "$root/fuzz/corpus/$t" -- -jobs=1 -workers=1 -print_final_stats=1 "$@") || status=$?
  grep -E '^(stat::|==|SUMMARY|.*panicked)' "fuzz/logs/$t/fuzz-0.log" | sed "s/^/fuzz: $t: /" || true
  return $status
}

# Builds every target once, in the chosen profile.
build() {
  (cd fuzz && CARGO_INCREMENTAL=0 nice -n 10 "${CARGO[@]}" fuzz build "${PROFILE[@]}" --sanitizer none)
}

mode=${1:-smoke}
case $mode in
  seed)
    for t in $TARGETS; do seed "$t"; done
    ;;
  smoke | ci)
    if [ "$mode" = ci ]; then
      secs=${2:-10}
      PROFILE=(--dev)
      toolchain || exit 1
    else
      secs=${2:-20}
      toolchain || exit 0
    fi
    build
    failed=()
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of libFuzzer flags
    for t in $TARGETS; do run "$t" -max_total_time="$secs" ${FUZZ_ARGS:-} || failed+=("$t"); done
    if [ ${#failed[@]} -gt 0 ]; then
      echo "fuzz: failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
      exit 1
    fi
    ;;
  long)
    runs=${2:-10000000}
    toolchain || exit 1
    build
    failed=()
    for t in $TARGETS; do
      start=$(date +%s)
      # shellcheck disable=SC2086 # FUZZ_ARGS is a list of libFuzzer flags
      run "$t" -runs="$runs" ${FUZZ_ARGS:-} || failed+=("$t")
      echo "fuzz: $t: stopped after $(($(date +%s) - start)) s (at most $runs runs), corpus $(find "fuzz/corpus/$t" -type f | wc -l) files"
    done
    if [ ${#failed[@]} -gt 0 ]; then
      echo "fuzz: failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 ci [SECONDS] | smoke [SECONDS] | long [RUNS] | seed" >&2
    exit 2
    ;;
esac
