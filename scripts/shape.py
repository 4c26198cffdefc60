#!/usr/bin/env python3
"""The shape rules of docs/architecture.md ("Shape"), checked over the workspace's Rust sources.

- no source file outside tests over 800 lines;
- no function outside tests over 80 lines (from its `fn` line to its closing brace);
- no import cycle between the modules of a crate (`use crate::…` and `crate::…` paths, by top-level module);
- the layer order of each service (LAYERS below, the order of docs/architecture.md's module map): a module uses
  modules of its own layer and of the layers below it, never one above (what a `#[cfg(test)]` item uses is left out);
- every end-to-end suite `tests/tests/<name>.rs` declared in the one test binary's root, `tests/tests/main.rs`
  (a suite not declared there would silently never build nor run).

Test files (`*_tests.rs`, `tests.rs`, `tests/`, `benches/`) are exempt. Prints each breach; exits 1 if any. Then
prints, as warnings that fail nothing, the files over WARN_FILE lines and the functions over WARN_FN: a file near the
cap wants a second concern taken out, not trimming to fit.
Usage: scripts/shape.py [--report] [root]   (--report prints the breaches but exits 0)
"""
import os
import re
import sys

MAX_FILE = 800
MAX_FN = 80
WARN_FILE = 700
WARN_FN = 70
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


def long_functions(lines, most=MAX_FN):
    """(name, first line, length) of each function longer than `most` lines, skipping `#[cfg(test)]` modules."""
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
            if j - i + 1 > most:
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


# The layers of each service, lowest first: the order of docs/architecture.md's module map. A module (a file or a
# folder; the longest module path listed names its layer) may use the modules of its own layer and of the layers
# before it. Modules not listed (the adapters' contracts in adapter/mod.rs, which name the types of each adapter layer)
# are not checked.
LAYERS = {
    os.path.join('services', 'llm-gateway', 'src'): [
        ['error', 'event', 'protocol', 'settings', 'headers'],
        ['catalog', 'model_names', 'limits', 'census', 'metrics', 'prep_pool'],
        ['adapter::framing'],
        ['adapter::transport'],
        ['adapter::common'],
        ['adapter::cloud::oauth', 'adapter::cloud::aws'],
        ['adapter::openai_chat', 'adapter::openai_responses', 'adapter::anthropic', 'adapter::gemini',
         'adapter::bedrock'],
        ['adapter::cloud::azure', 'adapter::cloud::vertex'],
        ['adapter::embed', 'adapter::count'],
        ['adapter::registry', 'adapter::testing'],
        ['hooks', 'start_error', 'status', 'convert', 'validate', 'tracing_spans', 'offload'],
        ['config'],
        ['generate', 'calls'],
        ['rpc', 'routes', 'server', 'http'],
    ],
    os.path.join('services', 'session-processor', 'src'): [
        ['names', 'ids', 'maps', 'event_wire', 'step_event'],
        ['store'],
        ['metrics', 'tools', 'events', 'gateway_pool'],
        ['config'],
        ['processor', 'context', 'history', 'retry', 'structured', 'title'],
        ['snapshot'],
        ['engine'],
        ['api'],
        ['server', 'diff_api', 'diagnostics'],
        ['runtimes', 'app'],
    ],
}

PATH_MOD = re.compile(r'#\[path = "([^"]+)"\]\s*\n\s*(?:pub(?:\([^)]*\))? )?mod (\w+);')
CFG_TEST = re.compile(r'^\s*#\[cfg\((?:test|any\(test[^\]]*)\)\]\s*\n.*\n', re.M)
CRATE_PATH = re.compile(r'\bcrate::((?:\w+::)*(?:\w+|\{))')


def module_of(rel):
    """The module path of a file relative to its crate's src/: `adapter/cloud/mod.rs` → `adapter::cloud`."""
    parts = rel.split(os.sep)
    parts[-1] = parts[-1][:-3]
    if parts[-1] == 'mod':
        parts.pop()
    return '::'.join(parts)


def crate_paths(text):
    """Every `crate::…` path in `text`, brace groups expanded (`crate::a::{b, c::d}` → `a::b`, `a::c::d`)."""
    out = []
    for m in CRATE_PATH.finditer(text):
        path = m.group(1)
        if not path.endswith('{'):
            out.append(path)
            continue
        depth, k = 1, m.end()
        while k < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[k], 0)
            k += 1
        out.extend(expand(path[:-1], text[m.end():k - 1]))
    return out


def expand(prefix, group):
    items, depth, start = [], 0, 0
    for k, c in enumerate(group + ','):
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
        elif c == ',' and depth == 0:
            items.append(group[start:k].strip())
            start = k + 1
    out = []
    for item in filter(None, items):
        if '{' in item:
            head, _, rest = item.partition('{')
            out.extend(expand(prefix + head, rest.rsplit('}', 1)[0]))
        else:
            out.append(prefix + item.split(' as ')[0])
    return out


def layer_breaches(root):
    out = []
    for src, layers in LAYERS.items():
        base = os.path.join(root, src)
        rank = {name: k for k, group in enumerate(layers) for name in group}

        def layer_of(path):
            parts = path.split('::')
            for n in range(len(parts), 0, -1):
                name = '::'.join(parts[:n])
                if name in rank:
                    return name
            return None

        files = {}
        for d, dirs, fs in os.walk(base):
            for f in fs:
                if f.endswith('.rs'):
                    rel = os.path.relpath(os.path.join(d, f), base)
                    if rel.split(os.sep)[0] != 'bin' and rel not in ('main.rs', 'lib.rs'):
                        files[rel] = open(os.path.join(d, f), encoding='utf-8').read()
        # a file declared with #[path] (`rpc_calls.rs` under `rpc.rs`) belongs to the module that declares it
        owner = {}
        for rel, text in files.items():
            for m in PATH_MOD.finditer(text):
                owner[os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))] = module_of(rel)
        for rel, text in sorted(files.items()):
            if is_test_file(os.path.join(base, rel)):
                continue
            mine = layer_of(owner.get(rel, module_of(rel)))
            if mine is None:
                continue
            cut = text.find('#[cfg(test)]\nmod tests')
            if cut >= 0:
                text = text[:cut]
            text = re.sub(r'//.*', '', CFG_TEST.sub('', text))
            seen = set()
            for path in crate_paths(text):
                used = layer_of(path)
                if used is None or used == mine or rank[used] <= rank[mine] or used in seen:
                    continue
                seen.add(used)
                out.append(f'{os.path.join(src, rel)}: {mine} (layer {rank[mine] + 1}) uses {used} '
                           f'(layer {rank[used] + 1}, above it)')
    return out


def undeclared_suites(root):
    folder = os.path.join(root, 'tests', 'tests')
    main_rs = os.path.join(folder, 'main.rs')
    if not os.path.exists(main_rs):
        return []
    declared = set(re.findall(r'^mod (\w+);', open(main_rs, encoding='utf-8').read(), re.M))
    return sorted(f for f in os.listdir(folder)
                  if f.endswith('.rs') and f != 'main.rs' and f[:-3] not in declared)


def source_lines(path):
    """The lines of `path` and how many come before its inline `#[cfg(test)] mod tests {` (all when it has none)."""
    lines = open(path, encoding='utf-8').read().split('\n')
    cut = next((k for k, l in enumerate(lines) if l.strip() == '#[cfg(test)]' and k + 1 < len(lines)
                and lines[k + 1].startswith('mod tests {')), len(lines))
    return lines, cut


def near_caps(root, files):
    """The files over WARN_FILE lines and the functions over WARN_FN that are still within the caps."""
    out = []
    for path in files:
        if is_test_file(path):
            continue
        lines, cut = source_lines(path)
        if WARN_FILE < cut <= MAX_FILE:
            out.append(f'{os.path.relpath(path, root)}: {cut} lines (warned over {WARN_FILE}, max {MAX_FILE})')
        for name, line, n in long_functions(lines, WARN_FN):
            if n <= MAX_FN:
                out.append(f'{os.path.relpath(path, root)}:{line}: fn {name} is {n} lines '
                           f'(warned over {WARN_FN}, max {MAX_FN})')
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    report = '--report' in sys.argv
    root = args[0] if args else '.'
    files = sorted(sources(root))
    breaches = []
    for path in files:
        if is_test_file(path):
            continue
        lines, cut = source_lines(path)
        if cut > MAX_FILE:
            breaches.append(f'{os.path.relpath(path, root)}: {cut} lines (max {MAX_FILE})')
        for name, line, n in long_functions(lines):
            breaches.append(f'{os.path.relpath(path, root)}:{line}: fn {name} is {n} lines (max {MAX_FN})')
    for crate, comp in import_cycles(files):
        breaches.append(f'{os.path.relpath(crate, root)}: import cycle between modules {", ".join(comp)}')
    breaches.extend(layer_breaches(root))
    for suite in undeclared_suites(root):
        breaches.append(f'tests/tests/{suite}: not declared in tests/tests/main.rs (it would never run)')
    for b in breaches:
        print(b)
    warnings = near_caps(root, files)
    for w in warnings:
        print(f'warning: {w}')
    print(f'{len(breaches)} breaches, {len(warnings)} warnings (near a cap)', file=sys.stderr)
    return 0 if report or not breaches else 1


if __name__ == '__main__':
    sys.exit(main())
