"""The Dockerfiles' side of deploy/validate.py: parsing a Dockerfile's stages, the workspace's packages and
binaries, and the cargo-chef rules (pinned, `cook` building what the final `cargo build` builds)."""

from __future__ import annotations

import re
from pathlib import Path

from validate_common import ROOT, fail, rel

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11; validate.sh installs tomli there
    import tomli as tomllib


def dockerfile_final_stage(path: Path) -> dict | None:
    if not path.is_file():
        return None
    text = re.sub(r"\\\n", " ", path.read_text())
    stages, current = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            current = {"from": rest, "env": {}, "expose": set(), "copies": [], "runs": []}
            stages.append(current)
        elif current is None:
            continue
        elif word == "ENV":
            for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|\S+)", rest):
                current["env"][m.group(1)] = m.group(2).strip('"')
        elif word == "EXPOSE":
            current["expose"] |= {int(p.split("/")[0]) for p in rest.split()}
        elif word == "COPY" and "--from=" not in rest:
            args = [a for a in rest.split() if not a.startswith("--")]
            if len(args) == 2:
                current["copies"].append((args[0], args[1]))
        elif word == "RUN":
            current["runs"].append(rest)
    if not stages:
        return None
    final = stages[-1]
    final["all_runs"] = [r for s in stages for r in s["runs"]]
    return final


def check_cargo_chef(path: Path, runs: list[str]) -> None:
    """cargo-chef is pinned and installed --locked, and `cook` builds, --locked, exactly the packages and binaries
    that the final `cargo build` does (or the cached layer would miss what that build compiles)."""
    text = path.read_text()
    if not re.search(r"^ARG CARGO_CHEF_VERSION=\d+\.\d+\.\d+$", text, re.M):
        fail(rel(path), "pin cargo-chef: ARG CARGO_CHEF_VERSION=<x.y.z>")
    if 'cargo install --locked "cargo-chef@${CARGO_CHEF_VERSION}"' not in text:
        fail(rel(path), 'install cargo-chef with cargo install --locked "cargo-chef@${CARGO_CHEF_VERSION}"')

    def targets(cmd: str) -> set[tuple[str, str]]:
        return set(re.findall(r"(-p|--bin)\s+(\S+)", cmd))

    cooks = [m.group(0) for r in runs for m in re.finditer(r"cargo chef cook[^&;]*", r)]
    builds = [m.group(0) for r in runs for m in re.finditer(r"cargo build[^&;]*", r)]
    if not any("cargo chef prepare" in r for r in runs) or len(cooks) != 1 or len(builds) != 1:
        fail(rel(path), "expected one `cargo chef prepare`, one `cargo chef cook` and one `cargo build`")
        return
    if "--locked" not in cooks[0] or "--release" not in cooks[0]:
        fail(rel(path), f"`{cooks[0].strip()}` should pass --release --locked, as the build does")
    if targets(cooks[0]) != targets(builds[0]):
        fail(rel(path), f"`{cooks[0].strip()}` and `{builds[0].strip()}` name different packages or binaries")


def workspace_packages() -> dict[str, set[str]]:
    """Workspace package name -> its binary target names, from the manifests."""
    ws = tomllib.loads((ROOT / "Cargo.toml").read_text())
    out = {}
    for member in ws.get("workspace", {}).get("members", []):
        manifest = ROOT / member / "Cargo.toml"
        if not manifest.is_file():
            continue
        pkg = tomllib.loads(manifest.read_text())
        name = pkg["package"]["name"]
        explicit = pkg.get("bin", [])
        bins = {b["name"] for b in explicit}
        if pkg["package"].get("autobins", True):
            if (ROOT / member / "src/main.rs").is_file() and not any(b.get("path") == "src/main.rs" for b in explicit):
                bins.add(name)
            bins |= {p.stem for p in (ROOT / member / "src/bin").glob("*.rs")}
        out[name] = bins
    return out
