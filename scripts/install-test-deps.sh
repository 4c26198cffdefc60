#!/usr/bin/env bash
# Installs what `make test` needs beyond a Rust toolchain, so that on a fresh Debian or Ubuntu machine `make test` is
# the whole set-up (as `make demo` is for the demo). `make test` runs it first; .ci/run calls it too. Every part is
# checked before anything is installed: on a machine that has it all, it takes about a second and changes nothing.
#
#  1. Debian packages, through scripts/apt-install.sh (as root it says which, then installs them; otherwise it
#     prints the command and this script fails): redis-server; npm; bubblewrap (the bash tool's sandbox, whose
#     tests run real commands in it); python3-venv (the venv below, and deploy-lint's); and the Go and Java
#     toolchains and gRPC libraries the examples are built with offline (tests/tests/clients_go_java.rs;
#     examples/README.md says why these packages).
#  2. cargo-nextest, the test runner, from crates.io into the user's cargo (`cargo install --locked`).
#  3. The Python packages of tests/python/requirements.txt, at their exact versions, in .tools/test-venv, whose
#     python3 the tests run.
#  4. The npm packages of clients/node, examples/node and tests/node, with `npm ci` from each package-lock.json.
#
# 2 to 4 install into the user's cargo and into this checkout (gitignored), so they need no root. Pins are upgraded
# on purpose, not by this script: tests/README.md, "Test dependencies".
set -euo pipefail
cd "$(dirname "$0")/.."

# The test runner's version, as the machines that run the suite have it; any installed version is used as it is.
NEXTEST_VERSION=0.9.143

# 1. Debian packages, each found by the command or file that shows it is there.
need=()
have() { command -v "$1" >/dev/null; }
have redis-server || need+=(redis-server)
have npm || need+=(npm)
have bwrap || need+=(bubblewrap)
have python3 || need+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
# examples/go in GOPATH mode against Debian's Go sources in /usr/share/gocode: no Go module download. grpc-go's codec
# needs the 1.5 series of github.com/golang/protobuf (wrappers.go is in it, not in the 1.3 series).
have go || need+=(golang-go)
have protoc || need+=(protobuf-compiler)
have protoc-gen-go || need+=(protoc-gen-go)
have protoc-gen-go-grpc || need+=(protoc-gen-go-grpc)
[ -d /usr/share/gocode/src/google.golang.org/grpc ] || need+=(golang-google-grpc-dev golang-google-protobuf-dev)
[ -f /usr/share/gocode/src/github.com/golang/protobuf/proto/wrappers.go ] || need+=(golang-github-golang-protobuf-1-5-dev)
# examples/java against the jars in /usr/share/java: no Maven repository.
have javac || need+=(default-jdk-headless)
have grpc_java_plugin || need+=(protobuf-compiler-grpc-java-plugin)
for jar in grpc-netty:libgrpc-java protobuf:libprotobuf-java netty-codec-http2:libnetty-java \
  perfmark-api:libperfmark-java geronimo-annotation-1.3-spec:libgeronimo-annotation-1.3-spec-java; do
  [ -f "/usr/share/java/${jar%%:*}.jar" ] || need+=("${jar#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  ./scripts/apt-install.sh "make test" "${need[@]}"
fi

# 2. The test runner.
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "make test: installing cargo-nextest $NEXTEST_VERSION (cargo install --locked; a few minutes)"
  cargo install --locked "cargo-nextest@$NEXTEST_VERSION"
fi

# 3. The Python packages, in a venv of their own: exactly the pinned versions whatever the machine's Python has, and
# no pip install into a distribution's Python (which Debian refuses). A copy of the requirements, written once the
# install succeeded, says the venv matches them.
venv=.tools/test-venv
requirements=tests/python/requirements.txt
if ! cmp -s "$requirements" "$venv/installed-requirements.txt" || ! "$venv/bin/python3" -c '' 2>/dev/null; then
  echo "make test: installing the Python packages of $requirements into $venv (pip install -r)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/installed-requirements.txt"
fi

# 4. The npm packages. clients/node first: its install builds it (`prepare`), and examples/node links to it. A copy
# of the lockfile in node_modules, written once `npm ci` succeeded, says the install matches it.
for dir in clients/node examples/node tests/node; do
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.installed-package-lock.json"; then
    echo "make test: installing the npm packages of $dir (npm ci, from its package-lock.json)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$dir/node_modules/.installed-package-lock.json"
  fi
done
