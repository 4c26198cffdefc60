#!/usr/bin/env python3
"""The size of the services' types (docs/architecture.md, "Shape"): methods per type and the files they are in.

A type's methods are the `fn`s of every `impl X` and `impl Trait for X` block of it in its crate's `src/` (test
files and `#[cfg(test)]` modules left out); its spread is the number of files holding such a block. A type is
named by where it is defined: of several types with one name, an impl block belongs to the one defined nearest
(the same file, else the closest enclosing module).

Prints the largest types of each service crate, then each breach of the targets:
- no type over MAX_METHODS methods;
- no type's `impl` blocks spread over more than MAX_FILES files;
- none of the files a newcomer is sent to first (ENTRY_MODULES) over MAX_ENTRY_LINES lines.

Breaches in the crates of ENFORCED fail the run (exit 1); the other crates' are printed as a report.
Usage: scripts/type_sizes.py [--top N] [--report] [root]   (--report prints the breaches but exits 0)
"""
import os
import re
import signal
import sys

MAX_METHODS = 25
MAX_FILES = 3
MAX_ENTRY_LINES = 500
CRATES = ('services/session-processor', 'services/llm-gateway')
ENFORCED = {'services/session-processor'}
# The modules docs/architecture.md sends a newcomer to first, per crate (relative to its src/): each is `<m>.rs` or
# `<m>/mod.rs`.
ENTRY_MODULES = {
    'services/session-processor': ('engine/driver', 'server', 'processor', 'engine/policy', 'store', 'engine'),
}

IMPL = re.compile(r'^(\s*)(unsafe )?impl\b')
FN = re.compile(r'^\s*(pub(\([^)]*\))? )?(const )?(async )?(unsafe )?(extern "C" )?fn (\w+)')
DEF = re.compile(r'^\s*(pub(\([^)]*\))? )?(struct|enum|union|trait|type) (\w+)', re.M)
SKIP_DIRS = {'target', 'tests', 'benches'}


def is_test_file(path):
    base = os.path.basename(path)
    return base.endswith('_tests.rs') or base == 'tests.rs' or base == 'test_support.rs'


def module_of(rel):
    """The module path of a file relative to src/: `store/mod.rs` -> ('store',), `store/lease.rs` -> (store, lease)."""
    parts = rel[:-3].split('/')
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(text):
    """The text before an inline `#[cfg(test)]` module, comments and string contents blanked out."""
    cut = re.search(r'^\s*#\[cfg\(test\)\]\s*\n\s*(pub(\([^)]*\))? )?mod \w+ \{', text, re.M)
    if cut:
        text = text[:cut.start()]
    text = re.sub(r'//[^\n]*', '', text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def impl_target(header):
    """The type an impl header is for: `impl<T> Trait for Foo<T> where …` -> Foo."""
    h = re.sub(r'\bwhere\b.*', '', header, flags=re.S)
    h = re.sub(r'^\s*(unsafe )?impl\s*', '', h)
    # drop the impl's own generics `<…>` at the start, nested ones included
    if h.startswith('<'):
        depth = 0
        for k, c in enumerate(h):
            depth += c == '<'
            depth -= c == '>'
            if depth == 0:
                h = h[k + 1:]
                break
    # `Trait<X> for Type`: the part after a top-level ` for `
    depth, cut = 0, None
    for k, c in enumerate(h):
        depth += c in '<(['
        depth -= c in '>)]'
        if depth == 0 and h[k:k + 5] == ' for ':
            cut = k + 5
    if cut is not None:
        h = h[cut:]
    m = re.search(r'([A-Za-z_]\w*)\s*(<|$|\{)', h.strip().lstrip('&').replace("'static ", '').replace('mut ', ''))
    if not m:
        return None
    return re.sub(r'.*::', '', m.group(1))


def impls(text):
    """(type name, methods) of each impl block of a file's text."""
    lines = text.split('\n')
    out = []
    i = 0
    while i < len(lines):
        m = IMPL.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        header = lines[i]
        j = i
        while '{' not in lines[j] and j + 1 < len(lines):
            j += 1
            header += ' ' + lines[j].strip()
        header = header[:header.index('{')] if '{' in header else header
        if lines[j].rstrip().endswith('}'):  # `impl X for Y {}` on one line
            out.append((impl_target(header), 0))
            i = j + 1
            continue
        k = j + 1
        fns = 0
        body_indent = indent + '    '
        while k < len(lines) and not (lines[k].startswith(indent + '}') and lines[k].strip().startswith('}')):
            fm = FN.match(lines[k])
            if fm and lines[k].startswith(body_indent) and not lines[k].startswith(body_indent + ' '):
                fns += 1
            k += 1
        out.append((impl_target(header), fns))
        i = k + 1
    return out


def crate_files(root, crate):
    src = os.path.join(root, crate, 'src')
    for d, dirs, files in os.walk(src):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        rel_dir = os.path.relpath(d, src)
        if rel_dir.split(os.sep)[0] == 'bin':
            continue
        for f in sorted(files):
            if f.endswith('.rs') and not is_test_file(f):
                yield os.path.join(d, f), os.path.relpath(os.path.join(d, f), src).replace(os.sep, '/')


def nearest(defs, module):
    """Of the modules defining a name, the one nearest `module`: itself, else its closest ancestor, else the first."""
    if module in defs:
        return module
    best = None
    for d in defs:
        if module[:len(d)] == d and (best is None or len(d) > len(best)):
            best = d
    if best is None:
        # defined in a sibling or descendant (an `impl` in a parent of its module): the longest shared prefix
        best = max(defs, key=lambda d: sum(1 for _ in zip(d, module) if _[0] == _[1]))
    return best


def measure(root, crate):
    """{(defining module, type): (methods, {file: methods})} for a crate."""
    texts = {rel: strip_tests(open(path, encoding='utf-8').read()) for path, rel in crate_files(root, crate)}
    defs = {}
    for rel, text in texts.items():
        for m in DEF.finditer(text):
            defs.setdefault(m.group(4), set()).add(module_of(rel))
    sizes = {}
    for rel, text in texts.items():
        module = module_of(rel)
        for name, fns in impls(text):
            if name is None or name not in defs:
                continue  # a foreign type (an impl of our trait for `str`, say)
            key = (nearest(defs[name], module), name)
            total, files = sizes.get(key, (0, {}))
            files[rel] = files.get(rel, 0) + fns
            sizes[key] = (total + fns, files)
    return sizes


def type_label(module, name):
    return '::'.join(module + (name,)) if module else name


def main():
    # Piped into `head`, stop quietly when the reader has seen enough.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = sys.argv[1:]
    report = '--report' in args
    top = 10
    if '--top' in args:
        top = int(args[args.index('--top') + 1])
        del args[args.index('--top'):args.index('--top') + 2]
    paths = [a for a in args if not a.startswith('--')]
    root = paths[0] if paths else '.'
    failed = False
    for crate in CRATES:
        sizes = measure(root, crate)
        ranked = sorted(sizes.items(), key=lambda kv: (-kv[1][0], -len(kv[1][1]), kv[0]))
        enforced = crate in ENFORCED
        print(f'{crate} ({"enforced" if enforced else "report only"}): largest types by methods')
        for (module, name), (total, files) in ranked[:top]:
            spread = ', '.join(f'{f} {n}' for f, n in sorted(files.items(), key=lambda kv: -kv[1]))
            print(f'  {total:4} methods in {len(files):2} files  {type_label(module, name)}  ({spread})')
        breaches = []
        for (module, name), (total, files) in ranked:
            if total > MAX_METHODS:
                breaches.append(f'{type_label(module, name)}: {total} methods (max {MAX_METHODS})')
            if len(files) > MAX_FILES:
                breaches.append(f'{type_label(module, name)}: impl blocks in {len(files)} files (max {MAX_FILES})')
        for module in ENTRY_MODULES.get(crate, ()):
            src = os.path.join(root, crate, 'src')
            found = [r for r in (f'{module}.rs', f'{module}/mod.rs') if os.path.exists(os.path.join(src, r))]
            if not found:
                breaches.append(f'src/{module}: no such module (the list of first reads is out of date)')
                continue
            n = len(open(os.path.join(src, found[0]), encoding='utf-8').read().split('\n')) - 1
            if n > MAX_ENTRY_LINES:
                breaches.append(f'src/{found[0]}: {n} lines (max {MAX_ENTRY_LINES} for a file a newcomer reads first)')
        for b in breaches:
            print(f'  {"breach" if enforced else "over target"}: {b}')
        print(f'  {len(breaches)} {"breaches" if enforced else "over target (not enforced)"}')
        failed |= enforced and bool(breaches)
    return 0 if report or not failed else 1


if __name__ == '__main__':
    sys.exit(main())
