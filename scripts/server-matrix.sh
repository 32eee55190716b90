#!/usr/bin/env bash
# Runs the core suites against each server build the crate supports, and a
# mixed five-node cluster, then prints the matrix (server × suite → passed /
# failed). Debian's redis-server 7.0 runs the whole suite elsewhere in CI;
# here it appears only inside the mixed cluster.
#
#     scripts/server-matrix.sh            # all rows
#     scripts/server-matrix.sh valkey     # one row: redis62 | valkey | mixed
#
# Needs the binaries scripts/fetch-servers.sh unpacks (it is run here); the
# suites below are the library package's, from the workspace's test build.
# Exits non-zero when any suite failed.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITES=(locking node_faults bad_input error_matrix lease fencing)
eval "$(scripts/fetch-servers.sh)"
REDIS70="$(command -v redis-server)"

declare -A ROWS=(
    [redis62]="$QUORUMLOCK_REDIS62_SERVER"
    [valkey]="$QUORUMLOCK_VALKEY_SERVER"
    # Two Redis 6.2, two Redis 7.0, one Valkey 8.1: a rolling migration.
    [mixed]="$QUORUMLOCK_REDIS62_SERVER,$QUORUMLOCK_REDIS62_SERVER,$REDIS70,$REDIS70,$QUORUMLOCK_VALKEY_SERVER"
)
ORDER=(redis62 valkey mixed)
[ $# -gt 0 ] && ORDER=("$@")

LOGS="${TMPDIR:-/tmp}/quorumlock-matrix.$$"
mkdir -p "$LOGS"
# One row's suites, one after another; each suite's line of the matrix goes
# to "$LOGS/<row>.result". The rows run side by side: each test starts its
# own servers on free ports, and the suites mostly wait on them.
run_row() {
    local row="$1" servers="$2" start=$SECONDS failed=0
    for suite in "${SUITES[@]}"; do
        local log="$LOGS/$row-$suite.log" status=0
        QUORUMLOCK_REDIS_SERVERS="$servers" QUORUMLOCK_TEST_NODES= \
            "${EXE[$suite]}" >"$log" 2>&1 || status=$?
        local line passed failures
        line="$(grep -E '^test result:' "$log" | tail -n 1 || true)"
        passed="$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line")"
        failures="$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
        echo "$suite ${passed:-0}/${failures:-?}" >>"$LOGS/$row.result"
        if [ "$status" -ne 0 ]; then
            failed=1
            echo "== $row $suite FAILED (log: $log)" >&2
            tail -n 60 "$log" >&2
        fi
    done
    echo "matrix: $row took $((SECONDS - start)) s" >&2
    return "$failed"
}
# The suites' test binaries, from the workspace's test build; the rows run
# them directly.
declare -A EXE
found="$(scripts/run-tests.py --path "${SUITES[@]}")"
mapfile -t paths <<<"$found"
for i in "${!SUITES[@]}"; do EXE[${SUITES[$i]}]="${paths[$i]}"; done
declare -A PIDS
for row in "${ORDER[@]}"; do
    servers="${ROWS[$row]:?unknown row $row (redis62, valkey, mixed)}"
    run_row "$row" "$servers" &
    PIDS[$row]=$!
done
failed=0
for row in "${ORDER[@]}"; do
    wait "${PIDS[$row]}" || failed=1
done
declare -A RESULT
for row in "${ORDER[@]}"; do
    while read -r suite result; do
        RESULT[$row/$suite]="$result"
    done <"$LOGS/$row.result"
done

printf '\n%-13s' "passed/failed"
for suite in "${SUITES[@]}"; do printf ' %-13s' "$suite"; done
printf '\n'
for row in "${ORDER[@]}"; do
    printf '%-13s' "$row"
    for suite in "${SUITES[@]}"; do printf ' %-13s' "${RESULT[$row/$suite]:-?}"; done
    printf '\n'
done
[ "$failed" -eq 0 ] && rm -rf "$LOGS"
exit "$failed"
