#!/bin/sh
# Writes to $1 the part of the Cargo workspace that dependency resolution needs: every Cargo.toml, Cargo.lock and
# toolchain file, plus a stub source file (`fn main() {}`) at the path of every target (libraries, binaries, tests,
# benches, examples, build scripts), as `cargo metadata` reports them.
#
# The Dockerfiles copy this recipe into the builder stage and build it first, so the layer that compiles the
# dependencies is reused until a manifest or the lockfile changes. Run it from the workspace root. It works offline:
# `cargo metadata --no-deps` reads the manifests only.
set -eu
out=${1:?usage: recipe.sh OUT_DIR}
mkdir -p "$out"
find . -path ./target -prune -o -path "./${out#/}" -prune -o \
  \( -name Cargo.toml -o -name Cargo.lock -o -name rust-toolchain -o -name rust-toolchain.toml \) -print |
  while read -r f; do
    mkdir -p "$out/$(dirname "$f")"
    cp "$f" "$out/$f"
  done
root=$(pwd)
cargo metadata --no-deps --format-version 1 --offline |
  grep -o '"src_path":"[^"]*"' | sed 's/^"src_path":"//; s/"$//' |
  while read -r p; do
    rel=${p#"$root"/}
    mkdir -p "$out/$(dirname "$rel")"
    echo 'fn main() {}' >"$out/$rel"
  done
