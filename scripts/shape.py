#!/usr/bin/env python3
"""The shape rules of docs/architecture.md ("Shape"), checked over the workspace's Rust sources.

- no source file outside tests over 800 lines;
- no function outside tests over 80 lines (from its `fn` line to its closing brace);
- no import cycle between the modules of a crate (`use crate::…` and `crate::…` paths, by top-level module);
- every end-to-end suite `tests/tests/<name>.rs` declared in the one test binary's root, `tests/tests/main.rs`
  (a suite not declared there would silently never build nor run).

Test files (`*_tests.rs`, `tests.rs`, `tests/`, `benches/`) are exempt. Prints each breach; exits 1 if any.
Usage: scripts/shape.py [--report] [root]   (--report prints the breaches but exits 0)
"""
import os
import re
import sys

MAX_FILE = 800
MAX_FN = 80
FN = re.compile(r'^(\s*)(pub(\([^)]*\))? )?(const )?(async )?(unsafe )?(extern "C" )?fn (\w+)')
SKIP_DIRS = {'target', '.git', '.tools', 'node_modules', 'fuzz'}


def is_test_file(path):
    base = os.path.basename(path)
    parts = path.split(os.sep)
    return base.endswith('_tests.rs') or base == 'tests.rs' or 'tests' in parts[:-1] or 'benches' in parts


def sources(root):
    for top in ('services', 'shared', 'bench'):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            for f in files:
                if f.endswith('.rs'):
                    yield os.path.join(d, f)


def long_functions(lines):
    """(name, first line, length) of each function longer than MAX_FN, skipping `#[cfg(test)]` modules."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == '#[cfg(test)]' and i + 1 < len(lines) and lines[i + 1].lstrip().startswith('mod '):
            break  # an inline test module runs to the end of the file
        m = FN.match(line)
        if m and not line.rstrip().endswith(';'):
            indent = m.group(1)
            j = i
            # the body ends at the first line that is exactly the indent plus `}` after the signature
            while j < len(lines) and not (lines[j].startswith(indent + '}') and
                                           len(lines[j]) - len(lines[j].lstrip()) == len(indent)):
                if j > i and lines[j].rstrip() == indent + '}':
                    break
                j += 1
            if j - i + 1 > MAX_FN:
                out.append((m.group(8), i + 1, j - i + 1))
            i = j
        i += 1
    return out


def crate_of(path):
    parts = path.split(os.sep)
    if 'src' not in parts:
        return None, None
    k = parts.index('src')
    rel = parts[k + 1:]
    crate = os.sep.join(parts[:k])
    if rel[0] == 'bin' or rel[0] in ('main.rs',):
        return None, None
    top = rel[0][:-3] if rel[0].endswith('.rs') else rel[0]
    return crate, top


USE_CRATE = re.compile(r'\bcrate::(\w+)')


def import_cycles(files):
    graph = {}
    for path in files:
        if is_test_file(path):
            continue
        crate, top = crate_of(path)
        if crate is None or top == 'lib':
            continue
        text = open(path, encoding='utf-8').read()
        cut = text.find('#[cfg(test)]\nmod tests')
        if cut >= 0:
            text = text[:cut]
        text = re.sub(r'//.*', '', text)
        for m in USE_CRATE.finditer(text):
            dep = m.group(1)
            if dep != top:
                graph.setdefault(crate, {}).setdefault(top, set()).add(dep)
    cycles = []
    for crate, g in graph.items():
        index, low, stack, on, comps = {}, {}, [], set(), []

        def strong(v, counter=[0]):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in g.get(v, ()):
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))

        for v in list(g):
            if v not in index:
                strong(v)
        for c in comps:
            cycles.append((crate, c))
    return cycles


def undeclared_suites(root):
    folder = os.path.join(root, 'tests', 'tests')
    main_rs = os.path.join(folder, 'main.rs')
    if not os.path.exists(main_rs):
        return []
    declared = set(re.findall(r'^mod (\w+);', open(main_rs, encoding='utf-8').read(), re.M))
    return sorted(f for f in os.listdir(folder)
                  if f.endswith('.rs') and f != 'main.rs' and f[:-3] not in declared)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    report = '--report' in sys.argv
    root = args[0] if args else '.'
    files = sorted(sources(root))
    breaches = []
    for path in files:
        if is_test_file(path):
            continue
        lines = open(path, encoding='utf-8').read().split('\n')
        cut = next((k for k, l in enumerate(lines) if l.strip() == '#[cfg(test)]' and k + 1 < len(lines)
                    and lines[k + 1].startswith('mod tests {')), len(lines))
        if cut > MAX_FILE:
            breaches.append(f'{os.path.relpath(path, root)}: {cut} lines (max {MAX_FILE})')
        for name, line, n in long_functions(lines):
            breaches.append(f'{os.path.relpath(path, root)}:{line}: fn {name} is {n} lines (max {MAX_FN})')
    for crate, comp in import_cycles(files):
        breaches.append(f'{os.path.relpath(crate, root)}: import cycle between modules {", ".join(comp)}')
    for suite in undeclared_suites(root):
        breaches.append(f'tests/tests/{suite}: not declared in tests/tests/main.rs (it would never run)')
    for b in breaches:
        print(b)
    print(f'{len(breaches)} breaches', file=sys.stderr)
    return 0 if report or not breaches else 1


if __name__ == '__main__':
    sys.exit(main())
