#!/usr/bin/env python3
"""Runs every test `cargo test --all-targets && cargo test --doc` runs, with
the test binaries side by side instead of one after another.

    scripts/run-tests.py            # the whole suite (the README's test command)
    scripts/run-tests.py -j 2       # two lanes instead of three
    scripts/run-tests.py --path locking fencing
                                    # the paths of those suites' binaries (the
                                    # library's integration tests), one per line

The paths let CI's server matrix and Docker stage run a suite again,
against other servers, with no second build.

The binaries are built once (`cargo test --all-targets --no-run`). Most
suites spend their time waiting on servers they start on free ports, so
they share the machine well and run in lanes side by side, beside the doc
tests (`cargo test --doc`, mostly compiling); the randomized safety runs and
the failover suite count grants and time failovers, so they run after the
others, one after another, alone on the machine (`SERIAL`).
Each binary runs as `cargo test` runs it: from its package's directory, with no arguments (a `harness = false` bench then
runs once, tiny, as a smoke test). Its whole output is printed when it
ends, so lanes never interleave; the run fails when any binary fails, and
the failures are listed at the end.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

# Timed runs that must not share the machine with each other.
SERIAL = ("safety", "safety_members", "safety_election", "safety_semaphore",
          "safety_rwlock", "members")
# The longest of the others first, so that the lanes end together.
LONGEST = ("model", "election", "lease", "quarantine", "cli_supervisor",
           "repair", "handoff", "semaphore", "failover", "error_matrix")


def binaries():
    """Every test executable of `cargo test --all-targets`, in cargo's order."""
    out = subprocess.run(
        ["cargo", "test", "--all-targets", "--no-run", "--message-format=json-render-diagnostics"],
        stdout=subprocess.PIPE, check=True, text=True).stdout
    found = []
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        kinds = msg["target"]["kind"]
        # Test-mode builds (unit tests, integration tests, examples' tests)
        # and the `harness = false` benches; not the binaries built for the
        # integration tests to run.
        if msg["profile"]["test"] or "bench" in kinds:
            found.append({
                "name": msg["target"]["name"],
                "src": os.path.relpath(msg["target"]["src_path"]),
                "exe": msg["executable"],
                "dir": os.path.dirname(msg["manifest_path"]),
            })
    return found


def serial_run(binary):
    return binary["src"] in (f"tests/{name}.rs" for name in SERIAL)


def run(binary, lock, failed):
    start = time.monotonic()
    done = subprocess.run([binary["exe"], *binary.get("args", [])], cwd=binary["dir"],
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    took = time.monotonic() - start
    with lock:
        print(f"     Running {binary['src']} ({os.path.relpath(binary['exe'])}) [{took:.1f} s]")
        sys.stdout.write(done.stdout)
        sys.stdout.flush()
        if done.returncode != 0:
            failed.append(f"{binary['src']} (exit {done.returncode})")


def lane(work, lock, failed):
    while True:
        try:
            binary = work.get_nowait()
        except queue.Empty:
            return
        run(binary, lock, failed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", "--jobs", type=int, default=3,
                        help="lanes for the suites that share the machine (default 3)")
    parser.add_argument("--path", nargs="+", metavar="NAME",
                        help="print the paths of these suites' binaries and run nothing")
    args = parser.parse_args()
    jobs = max(1, args.jobs)
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    every = binaries()
    if args.path:
        suites = {b["src"]: b["exe"] for b in every}
        missing = [n for n in args.path if f"tests/{n}.rs" not in suites]
        if missing:
            sys.exit("no test binary for " + ", ".join(missing))
        print("\n".join(suites[f"tests/{n}.rs"] for n in args.path))
        return 0
    serial, shared = queue.Queue(), queue.Queue()
    rank = {name: i for i, name in enumerate(LONGEST)}
    for b in every:
        if serial_run(b):
            serial.put(b)
    for b in sorted((b for b in every if not serial_run(b)),
                    key=lambda b: rank.get(b["name"], len(LONGEST))):
        shared.put(b)
    lock, failed = threading.Lock(), []
    start = time.monotonic()
    doc = {"name": "doc tests", "src": "cargo test --doc", "exe": "cargo",
           "args": ["test", "--doc"], "dir": os.getcwd()}
    lanes = [threading.Thread(target=run, args=(doc, lock, failed))]
    lanes += [threading.Thread(target=lane, args=(shared, lock, failed)) for _ in range(jobs)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    # Then the timed runs, alone on the machine.
    lane(serial, lock, failed)
    print(f"{len(every)} test binaries and the doc tests in {time.monotonic() - start:.0f} s")
    if failed:
        print("failed:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
