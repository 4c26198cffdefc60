#!/usr/bin/env python3
"""Renders and lints deploy/helm/llm-platform with Helm's own engine, for `make deploy-lint` (deploy/validate.sh).

No `helm` binary is installable from the registries this project uses (PyPI, npm, Debian, crates.io); the
helm-python-sdk wheel on PyPI ships libhelm_c, a C ABI over Helm's Go SDK (v4), which renders (`helm template`)
and lints (`helm lint --strict`) charts offline. `helm install` / `helm template` with the real binary are the
entry points for users; this script is the test.

    render.py VALUES_FILE|- OUT_ALL OUT_CORE

writes every rendered manifest to OUT_ALL and those of the core Kubernetes API (not monitoring.coreos.com) to
OUT_CORE, for kubernetes-validate. Exits non-zero when lint reports an error or a warning.
"""

from __future__ import annotations

import sys
from pathlib import Path

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parent / "llm-platform"
KUBE_VERSION = "v1.30.0"


def main() -> int:
    values_file, out_all, out_core = sys.argv[1:4]
    values = {} if values_file == "-" else yaml.safe_load(Path(values_file).read_text()) or {}
    report = helm.lint(str(CHART), values, strict=True, kube_version=KUBE_VERSION, namespace="llm")
    problems = [m for m in report.get("messages") or [] if m.get("severity", 0) >= 2] + \
        [{"error": e} for e in report.get("errors") or []]
    for m in problems:
        print(f"helm lint {values_file}: {m.get('path', '')} {m.get('error')}", file=sys.stderr)
    rendered = helm.Chart.load(str(CHART)).render(values, name="platform", namespace="llm", is_install=True)
    docs = []
    for path in sorted(rendered):
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(rendered[path]) if d]
    Path(out_all).write_text(yaml.safe_dump_all(docs, sort_keys=False))
    core = [d for d in docs if not str(d.get("apiVersion", "")).startswith("monitoring.coreos.com/")]
    Path(out_core).write_text(yaml.safe_dump_all(core, sort_keys=False))
    print(f"deploy-lint: helm chart rendered with {values_file}: {len(docs)} manifests "
          f"(Helm {helm.helm_sdk_version()}), lint: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
