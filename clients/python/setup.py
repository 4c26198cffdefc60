"""Generates the gRPC stubs from the repository's proto/ while the package is built.

`pip install clients/python` (from a checkout) builds the wheel in place: `build_py` runs grpcio-tools' protoc over
every .proto under proto/ and writes `llm/gateway/v1/*` and `llm/sessions/v1/*` (messages, typing stubs, services)
next to `llm_client` in the wheel. The generated modules keep the proto packages as Python packages, the convention
of protoc's Python generator, so `from llm.sessions.v1 import sessions_pb2` works as in any generated client.

The generated code checks at import that grpcio and protobuf are at least the versions that generated it, so the
package requires exactly those minimums (the versions in the build environment).
"""

import os
import sys
from importlib import metadata

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_root() -> str:
    """proto/ of the checkout (two levels up), or LLM_PROTO_ROOT."""
    root = os.environ.get("LLM_PROTO_ROOT") or os.path.join(HERE, "..", "..", "proto")
    if not os.path.isdir(os.path.join(root, "llm")):
        sys.exit(f"llm-grpc-client: no protos at {root}; build from a checkout of the repository or set LLM_PROTO_ROOT")
    return root


def proto_files(root: str) -> list:
    found = []
    for dirpath, _, names in os.walk(os.path.join(root, "llm")):
        found += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(".proto")]
    return sorted(found)


class GenerateStubs(build_py):
    """build_py that also generates the stubs into the build directory."""

    def run(self) -> None:
        super().run()
        from grpc_tools import protoc

        root = proto_root()
        files = proto_files(root)
        include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
        out = self.build_lib
        args = ["protoc", f"-I{root}", f"-I{include}", f"--python_out={out}", f"--pyi_out={out}",
                f"--grpc_python_out={out}"] + files
        if protoc.main(args) != 0:
            sys.exit("llm-grpc-client: protoc failed on " + " ".join(files))
        for f in files:
            pkg = os.path.dirname(f)
            while pkg:
                open(os.path.join(out, pkg, "__init__.py"), "a").close()
                pkg = os.path.dirname(pkg)
        self.announce(f"generated stubs for {len(files)} protos into {out}", level=2)


def minimum(dist: str) -> str:
    """`dist>=X.Y` for the installed version X.Y.Z of `dist` (the generator's own)."""
    major, minor = metadata.version(dist).split(".")[:2]
    return f"{dist}>={major}.{minor}"


setup(
    cmdclass={"build_py": GenerateStubs},
    install_requires=[minimum("grpcio-tools").replace("grpcio-tools", "grpcio"), minimum("protobuf")],
)
