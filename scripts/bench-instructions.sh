#!/usr/bin/env bash
# Client instructions per lock cycle, counted by valgrind's callgrind (the
# same count on every run, whatever else the machine is doing).
#
# Runs the bench binary's CPU child (one acquire+release at a time against
# five local redis-server nodes it starts itself) twice, with LOW and HIGH
# cycles, and divides the difference by HIGH - LOW, so start-up and
# connection set-up cancel out. The allocations per cycle are the child's
# own count (its sequential cycles after the first 1,000).
#
#   scripts/bench-instructions.sh [quorumlock|ideal|rslock ...]
set -euo pipefail
cd "$(dirname "$0")/.."
LOW=${LOW:-1000}
HIGH=${HIGH:-6000}
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(quorumlock ideal rslock)

cargo bench --bench quorum --no-run 2>/dev/null
bin=$(cargo bench --bench quorum --no-run --message-format=json 2>/dev/null |
    grep '"name":"quorum"' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() { # kind cycles -> total instructions
    QUORUMLOCK_BENCH_CHILD=cpu QUORUMLOCK_BENCH_KIND=$1 QUORUMLOCK_BENCH_SEQUENTIAL=$2 \
        valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1.$2" "$bin" >"$out/res.$1.$2" 2>"$out/log.$1.$2"
    sed -n 's/^summary: //p; s/^totals: //p' "$out/cg.$1.$2" | head -n 1
}

for kind in "${kinds[@]}"; do
    low=$(count "$kind" "$LOW")
    high=$(count "$kind" "$HIGH")
    # The child's own count of allocations per sequential cycle (alloc.rs).
    allocs=$(sed -n 's/.*"allocs_per_cycle":\([0-9.]*\).*/\1/p' "$out/res.$kind.$HIGH")
    echo "$kind: $(( (high - low) / (HIGH - LOW) )) instructions per cycle ($LOW → $HIGH cycles: $low → $high), ${allocs:-?} allocations per cycle"
done
