#!/usr/bin/env python3
"""Checks the library's layering: each unit of src/ (a folder, or a file
directly under src/) may name only units on its own floor or the floors
below it, and the units on one floor never name each other in a circle.
How long a file is, is judged in review: a file holds one concept.

A reference is any `crate::unit` path in a file's code (comments and
string literals are skipped). The floors, from the top:

  FLOORS below is the one place the layering is written; CONTRIBUTING.md
  ("The library's source") describes what each floor holds.

Usage: scripts/check-modules.py [--graph]
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# Top to bottom. A unit may name units on its floor and below.
FLOORS = [
    # The client's construction (its builder, nodes and readiness), the
    # public handle, the request, the held lock, and the primitives built
    # on it: the semaphore, leader election, the read–write lock.
    ["lib", "client", "redlock", "request", "lock", "semaphore", "election", "rwlock"],
    # How the nodes decide together: the rule, the fan-out, acquisition
    # and retries, extension and release, hand-off.
    ["quorum"],
    # A held lock's lease: its term, renewal, the lost signal.
    ["lease"],
    # A member (one server, a Sentinel group, a Redis Cluster): where its
    # commands go, each server's link, restart quarantine, one vote's path.
    ["member"],
    # One server's wire path: its commands and what each reply means, Lua,
    # admission, the durable wait.
    ["node"],
    # What is counted and read back: counters, latency, `Stats`, `Status`,
    # `Health`.
    ["stats", "status", "health"],
    # Values every floor uses: settings, resources and keys, tokens, time.
    ["config", "keys", "token", "validity"],
    # The error type and how a lock ends.
    ["error"],
    # Randomness from the OS.
    ["random"],
]
FLOOR = {unit: i for i, units in enumerate(FLOORS) for unit in units}


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)  # comments and docs
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)  # string literals
    return text


def files():
    for root, _, names in os.walk(SRC):
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, SRC)
                unit = rel.split(os.sep)[0]
                yield rel, (unit[:-3] if unit.endswith(".rs") else unit), path


def main(argv):
    problems = []
    edges = {}
    count = 0
    for rel, unit, path in files():
        count += 1
        with open(path) as f:
            text = f.read()
        if unit not in FLOOR:
            problems.append(f"{rel}: unit `{unit}` is on no floor of FLOORS")
            continue
        for m in re.finditer(r"\bcrate::([a-z_][a-z0-9_]*)", strip(text)):
            other = m.group(1)
            if other == unit or other not in FLOOR:
                continue
            edges.setdefault((unit, other), set()).add(rel)
            if FLOOR[other] < FLOOR[unit]:
                problems.append(
                    f"{rel}: `{unit}` (floor {FLOOR[unit]}) names `{other}`, "
                    f"which is above it (floor {FLOOR[other]})"
                )
    # No circle among the units of one floor.
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)

    def reaches(a, b, seen):
        for n in graph.get(a, ()):
            if n == b or (n not in seen and (seen.add(n) or reaches(n, b, seen))):
                return True
        return False

    for a, b in sorted(edges):
        if FLOOR[a] == FLOOR[b] and reaches(b, a, set()):
            where = ", ".join(sorted(edges[(a, b)]))
            problems.append(f"`{a}` and `{b}` name each other ({where})")
    if "--graph" in argv:
        for (a, b), where in sorted(edges.items(), key=lambda e: (FLOOR[e[0][0]], e[0])):
            print(f"{a} -> {b}  ({', '.join(sorted(where))})")
    for p in sorted(set(problems)):
        print(p)
    if problems:
        return 1
    units = len({u for _, u, _ in files()})
    print(f"{count} files in {units} units on {len(FLOORS)} floors; layering holds")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
