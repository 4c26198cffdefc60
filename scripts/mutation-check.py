#!/usr/bin/env python3
"""Breaks the gateway on purpose, one way at a time, and shows the test suite failing for each (tests/README.md,
"Mutation check"): proof that the tests of the HTTP front door and the fakes behind them can fail.

Each mutation is a text replacement in one source file of a scratch copy of the checkout (a `git worktree` of HEAD in
a temporary folder; the working tree is never touched), followed by the tests that should catch it. A mutation the
tests do not catch, or whose anchor text is gone (the code moved: update the anchor), fails the check.

Usage: scripts/mutation-check.py [name ...]   (default: every mutation; `--list` lists them)
Takes a few minutes per mutation on two cores (an incremental build of the gateway and the end-to-end binary).
"""
import os
import subprocess
import sys
import tempfile

GATEWAY = "services/llm-gateway/src/"

# name: (file, text to find, its replacement, nextest filter of the tests that must fail)
MUTATIONS = {
    "ignore-content-type": (
        GATEWAY + "adapter/framing/mod.rs",
        '        "application/json" | "text/json" => Ok(Some(Framing::Json)),',
        '        "application/json" | "text/json" => Ok(Some(expected)),',
        "test(/^gateway_upstream_manners::/) | test(/framing/)",
    ),
    "drop-strict": (
        GATEWAY + "http/openai_chat/request.rs",
        "        strict: t.function.strict.unwrap_or(false),",
        "        strict: false,",
        "test(/strict/) | test(/^http_frameworks::/)",
    ),
    "rewrite-error-code": (
        GATEWAY + "http/upstream.rs",
        '                Some(serde_json::json!({ "error": error }))',
        '                Some(serde_json::json!({ "error": {"message": error["message"], "type": error["type"], '
        '"param": error["param"], "code": null} }))',
        "test(/^http_openai_sdk::errors/) | test(/relays_its_error_object/)",
    ),
    "drop-rate-limit-header": (
        GATEWAY + "adapter/transport/classify.rs",
        '        let wanted = name.starts_with("x-ratelimit-")',
        '        let wanted = name.starts_with("x-ratelimit-never-")',
        "test(/rate_limit_headers|errors_reach_the_sdk|relayed_as_sent/)",
    ),
    "forward-unknown-field": (
        GATEWAY + "adapter/mod.rs",
        "            body: bytes::Bytes::from(self.body.to_string()),",
        '            body: bytes::Bytes::from({ let mut b = self.body; b["gateway_note"] = 1.into(); b.to_string() }),',
        "test(/^http_openai_sdk::/) | test(/^gateway_scenarios::/)",
    ),
}


def run(cmd, cwd, **kw):
    return subprocess.run(cmd, cwd=cwd, **kw)


def main():
    args = sys.argv[1:]
    if args == ["--list"]:
        print("\n".join(MUTATIONS))
        return 0
    names = args or list(MUTATIONS)
    unknown = [n for n in names if n not in MUTATIONS]
    if unknown:
        print(f"unknown mutation(s): {', '.join(unknown)}; --list lists them", file=sys.stderr)
        return 2
    root = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()
    scratch = tempfile.mkdtemp(prefix="mutation-check-")
    run(["git", "worktree", "add", "--detach", scratch, "HEAD"], root, check=True, capture_output=True)
    # The scratch copy builds into the checkout's own target directory: only what a mutation touches is rebuilt.
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(root, "target", "mutation-check"))
    survivors = []
    try:
        for name in names:
            path, find, replace, tests = MUTATIONS[name]
            source = os.path.join(scratch, path)
            original = open(source).read()
            if original.count(find) != 1:
                print(f"{name}: the anchor text is not in {path} exactly once; update the mutation", file=sys.stderr)
                survivors.append(name)
                continue
            open(source, "w").write(original.replace(find, replace))
            print(f"{name}: {path} mutated; running {tests}", flush=True)
            result = run(
                ["cargo", "nextest", "run", "-p", "llm-gateway", "-p", "e2e-tests", "--no-fail-fast", "-E", tests],
                scratch, env=env, capture_output=True, text=True,
            )
            open(source, "w").write(original)
            failed = [l.strip() for l in result.stdout.splitlines() + result.stderr.splitlines() if " FAIL " in l]
            if result.returncode != 0 and failed:
                print(f"{name}: caught by {len(set(failed))} failing test(s), e.g. {sorted(set(failed))[0]}")
            else:
                tail = "\n".join(result.stderr.splitlines()[-5:])
                print(f"{name}: NOT caught (exit {result.returncode})\n{tail}", file=sys.stderr)
                survivors.append(name)
    finally:
        run(["git", "worktree", "remove", "--force", scratch], root, capture_output=True)
    if survivors:
        print(f"mutations the tests did not catch: {', '.join(survivors)}", file=sys.stderr)
        return 1
    print(f"every mutation caught ({len(names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
