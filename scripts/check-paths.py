#!/usr/bin/env python3
"""Checks that every file named in the docs and in code comments exists.

Scans the Markdown pages (README.md, CONTRIBUTING.md, BENCHMARKS.md,
docs/, cli/README.md, docker/README.md; not CHANGELOG.md, which is
history) and the comments of the Rust sources (src/, cli/, testkit/,
tests/, benches/, examples/, model/) and of the Lua scripts.

- A Markdown link `[…](path#anchor)` resolves from its page's folder, and
  its anchor must be a heading of the page it names (GitHub's slugs).
- Any other mention — a word ending in a file extension (`node/reply.rs`,
  `fencing.md`, `lua/*.lua`), or a path from a top folder (`src/node/lua/`,
  `.ci/run`) — resolves from the folder of the file that names it, one of
  its parents, or the `src/` beside one of them (so `lease/mod.rs` in
  src/quorum/ and `node/lua/extend.lua` in README.md are found); a Lua
  script named alone is one of src/node/lua/. Only .rs and .lua files are
  checked by bare name: `summary.md` or `job.sh` alone may be any file.

Prints file:line and the mention for each that resolves nowhere.
Usage: scripts/check-paths.py
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGES = ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "docs/*.md", "cli/README.md",
         "docker/README.md"]
SOURCES = ["src/**/*.rs", "src/**/*.lua", "cli/**/*.rs", "testkit/**/*.rs", "tests/**/*.rs",
           "benches/**/*.rs", "examples/**/*.rs", "model/**/*.rs"]
LUA = os.path.join(ROOT, "src", "node", "lua")
TOPS = r"src|docs|tests|benches|examples|scripts|cli|testkit|model|docker|\.ci|\.cargo"
WORD = r"[\w.*-]+"
MENTION = re.compile(
    rf"(?<![\w./:-])((?:[a-z0-9_-][a-z0-9_.-]*/)+{WORD}\.(?:rs|lua|md|py|sh|toml|yml|svg)"
    rf"|{WORD}\.(?:rs|lua)|(?:{TOPS})/(?:{WORD}/?)*)(?![\w/-])")
# Markdown links; rustdoc's (`crate::x`, `Self`) have no `/` or `.` and are skipped.
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")
URL = re.compile(r"\w+://\S*")


def comment(line, path):
    if path.endswith(".lua"):
        return line.split("--", 1)[1] if "--" in line else ""
    found = re.search(r"(?<!:)//(.*)", line)
    return found.group(1) if found else ""


def resolves(name, folder):
    if name.endswith(".lua") and glob.glob(os.path.join(LUA, name)):
        return True
    while True:
        if any(glob.glob(os.path.join(base, name)) for base in (folder, os.path.join(folder, "src"))):
            return True
        if folder == ROOT:
            return False
        folder = os.path.dirname(folder)


def anchors(page):
    with open(page, encoding="utf-8") as f:
        return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", f.read(), re.M)}


def problems(path):
    folder = os.path.dirname(path)
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            text = line if path.endswith(".md") else comment(line, path)
            for target, anchor in LINK.findall(text):
                if "://" in target or "::" in target or not re.search(r"[./]|^$", target):
                    continue
                page = os.path.join(folder, target) if target else path
                if not os.path.exists(page):
                    yield n, target
                elif anchor and page.endswith(".md") and anchor not in anchors(page):
                    yield n, f"{target}#{anchor}"
            for name in MENTION.findall(URL.sub("", LINK.sub("](", text))):
                if not resolves(name.rstrip("."), folder):
                    yield n, name


def main():
    stale = [f"{os.path.relpath(path, ROOT)}:{n}: {name}"
             for pattern in PAGES + SOURCES
             for path in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True))
             for n, name in problems(path)]
    print("\n".join(stale), end="\n" if stale else "")
    if stale:
        print(f"{len(stale)} paths named in docs or comments do not exist", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
