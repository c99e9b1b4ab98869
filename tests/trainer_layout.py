#!/usr/bin/env python3
"""trainer_layout.py TRAINER_DIR TOP_DIR - checks the quoted #includes of
every source file under TRAINER_DIR against TRAINER_DIR/layers (the format
is described there).  Prints one line per offence and, last, a summary line;
exits 1 on any offence, 2 when the layers file cannot be read.

An include "x" resolves as the compiler does with -I TRAINER_DIR and the
top-level directories' -I flags: first beside the including file, then
under TRAINER_DIR, then under TOP_DIR/D for each top-level directory D; one
that resolves nowhere is an offence too (a stale include).
"""
import os
import re
import sys

SRC_EXT = ('.c', '.h', '.cu', '.cuh')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_layers(path):
    layer, neigh, outside = {}, set(), {}
    with open(path) as f:
        n = 0
        for lineno, line in enumerate(f, 1):
            w = line.split('#', 1)[0].split()
            if not w:
                continue
            if w[0] == 'layer' and len(w) > 1:
                for d in w[1:]:
                    if d in layer:
                        raise ValueError('%s:%d: %s in two layers' % (path, lineno, d))
                    layer[d] = n
                n += 1
            elif w[0] == 'neighbour' and len(w) == 3:
                neigh.add((w[1], w[2]))
            elif w[0] == 'outside' and len(w) > 2:
                outside.setdefault(w[1], set()).update(w[2:])
            else:
                raise ValueError('%s:%d: not a line of the layers file' % (path, lineno))
    for a, b in neigh:
        if layer.get(a) is None or layer.get(b) is None or layer[a] != layer[b]:
            raise ValueError('%s: neighbours %s and %s are not folders of one layer' % (path, a, b))
    return layer, neigh, outside


def cycles(edges):
    """The nodes of each circle of the directed graph edges (node -> set)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
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
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    trainer, top = sys.argv[1], sys.argv[2]
    try:
        layer, neigh, outside = read_layers(os.path.join(trainer, 'layers'))
    except (OSError, ValueError) as e:
        print('layers: %s' % e)
        return 2
    tops = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d)) and not d.startswith('.'))
    bad = []
    files = 0
    units, folders = {}, {}
    for d, dirs, fs in os.walk(trainer):
        dirs.sort()
        for f in sorted(fs):
            if not f.endswith(SRC_EXT):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, trainer)
            folder = os.path.dirname(rel)
            files += 1
            if folder not in layer:
                bad.append('%s: its folder %s is in no layer' % (rel, folder or '(the root)'))
                continue
            with open(path, errors='replace') as fh:
                text = fh.read()
            unit = os.path.splitext(rel)[0]
            for name in INCLUDE.findall(text):
                here = os.path.normpath(os.path.join(d, name))
                under = os.path.normpath(os.path.join(trainer, name))
                if os.path.isfile(here) or os.path.isfile(under):
                    tgt = os.path.relpath(here if os.path.isfile(here) else under, trainer)
                    if tgt.startswith('..'):
                        bad.append('%s: includes "%s", outside trainer/ by a relative path' % (rel, name))
                        continue
                    tf = os.path.dirname(tgt)
                    tu = os.path.splitext(tgt)[0]
                    if tu != unit:
                        units.setdefault(unit, set()).add(tu)
                    if tf != folder:
                        folders.setdefault(folder, set()).add(tf)
                    if tf not in layer:
                        bad.append('%s: includes %s of a folder in no layer' % (rel, tgt))
                    elif layer[tf] > layer[folder]:
                        bad.append('%s: includes %s of a higher layer (%s above %s)' % (rel, tgt, tf, folder))
                    elif layer[tf] == layer[folder] and tf != folder and (folder, tf) not in neigh:
                        bad.append('%s: includes %s of %s, of its own layer and no neighbour' % (rel, tgt, tf))
                    continue
                found = [t for t in tops if os.path.isfile(os.path.join(top, t, name))]
                if not found:
                    bad.append('%s: includes "%s", which is nowhere (stale)' % (rel, name))
                elif not set(found) & outside.get(folder, set()):
                    bad.append('%s: includes "%s" of %s/, which layers does not let %s include'
                               % (rel, name, found[0], folder))
    for c in cycles(units):
        bad.append('a circle of files: %s' % ' -> '.join(c))
    for c in cycles(folders):
        bad.append('a circle of folders: %s' % ' -> '.join(c))
    for b in bad:
        print(b)
    print('%d files in %d folders, %d offences' % (files, len(layer), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
