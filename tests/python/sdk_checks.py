"""What the SDK test scripts share: `check`, which prints `ok: <name>` when a check holds and exits non-zero naming
it when it does not. Checks are plain `if`s, not `assert` statements, so they still run under PYTHONOPTIMIZE."""

import sys


def check(ok: bool, name: str, detail: object = "") -> None:
    """Prints `ok: name`, or exits non-zero naming the failed check."""
    if not ok:
        print(f"FAILED: {name}: {detail!r}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {name}", flush=True)
