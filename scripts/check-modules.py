#!/usr/bin/env python3
"""Checks the library's source layout: no file over the line limit, and no
cycle among its modules (module A names module B, directly or through
others, and B names A). A module is a file under src/ (the crate root,
src/lib.rs, and src/bin/ excepted); a reference is any `crate::a::b` path
or `super::x` path in its code, resolved to the file that defines it.

Usage: scripts/check-modules.py [--max-lines N] [--graph]
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def modules():
    found = {}
    for root, dirs, files in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        if rel.startswith("bin"):
            continue
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.normpath(os.path.join(rel, f))
            if path == "lib.rs":
                continue
            parts = [] if rel == "." else rel.split(os.sep)
            stem = f[:-3]
            if stem != "mod":
                parts.append(stem)
            found["::".join(parts)] = os.path.join(SRC, path)
    return found


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)  # comments and docs
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)  # string literals
    return text


PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def root_exports():
    """Names the crate root re-exports (`pub use a::{B, C}`), by module."""
    with open(os.path.join(SRC, "lib.rs")) as f:
        text = strip(f.read())
    names = {}
    for m in re.finditer(r"\bpub\s+use\s+([a-z_][a-z0-9_:]*?)::(\{[^;]*\}|[A-Za-z_][A-Za-z0-9_]*)\s*;", text):
        for item in re.split(r"[,\s{}]+", m.group(2)):
            if item:
                names[item] = m.group(1)
    return names


ROOT = {}


def targets(name, text, mods):
    """The modules `name` refers to."""
    out = set()
    base = name.split("::") if name else []
    refs = []
    for m in USE_GROUP.finditer(text):
        for item in re.split(r"[,\s]+", m.group(3)):
            item = item.strip().strip("{}")
            if item and item != "self":
                refs.append((m.group(1), m.group(2) + "::" + item.split("::")[0]))
            elif item == "self":
                refs.append((m.group(1), m.group(2)))
    for m in PATH.finditer(text):
        refs.append((m.group(1), m.group(2)))
    for root, rest in refs:
        segs = [s for s in rest.split("::") if s]
        if root == "crate":
            prefix = []
        else:
            prefix = base[:-1] if not mods.get("::".join(base), "").endswith("mod.rs") else base
            while segs and segs[0] == "super":
                prefix = prefix[:-1]
                segs = segs[1:]
        full = prefix + segs
        if root == "crate" and full and full[0] in ROOT:
            full = ROOT[full[0]].split("::") + full
        # the longest prefix that is a module
        for n in range(len(full), 0, -1):
            cand = "::".join(full[:n])
            if cand in mods:
                if cand != name:
                    out.add(cand)
                break
    return out


def cycles(graph):
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return comps


def main():
    max_lines = 450
    args = sys.argv[1:]
    if "--max-lines" in args:
        max_lines = int(args[args.index("--max-lines") + 1])
    mods = modules()
    ROOT.update(root_exports())
    graph = {}
    failed = False
    for name, path in sorted(mods.items()):
        with open(path) as f:
            text = f.read()
        lines = text.count("\n")
        if lines > max_lines:
            print(f"{os.path.relpath(path, os.path.join(SRC, '..'))}: {lines} lines (limit {max_lines})")
            failed = True
        graph[name] = targets(name, strip(text), mods)
    if "--graph" in args:
        for name in sorted(graph):
            print(f"{name or 'lib'} -> {', '.join(sorted(graph[name])) or '-'}")
    for comp in cycles(graph):
        print("module cycle: " + " -> ".join(comp))
        failed = True
    if failed:
        sys.exit(1)
    print(f"{len(mods)} modules, no cycle, none over {max_lines} lines")


if __name__ == "__main__":
    main()
