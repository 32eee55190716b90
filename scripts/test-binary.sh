#!/usr/bin/env bash
# Prints the path of the library's test binary for each suite named
# (`tests/NAME.rs`), one per line, from the workspace's test build: the one
# `scripts/run-tests.py` makes (built here when missing). A suite then runs
# again, against other servers, without a second build.
#
#     "$(scripts/test-binary.sh locking)" --ignored
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --all-targets --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
found = {}
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    name, src = m["target"]["name"], m["target"]["src_path"]
    if src == os.path.join(os.getcwd(), "tests", name + ".rs"):
        found[name] = m["executable"]
missing = [s for s in sys.argv[1:] if s not in found]
if missing:
    sys.exit("no test binary for " + ", ".join(missing))
print("\n".join(found[s] for s in sys.argv[1:]))
' "$@"
