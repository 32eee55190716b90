#!/usr/bin/env bash
# Five local Redis nodes to try quorumlock on, without Docker: redis-server
# processes on 127.0.0.1:7001 to 7005, daemonized, without persistence,
# their data and logs in a private directory. (Five containers instead:
# docker/cluster.sh; the tests and demos start nodes of their own.)
#
# Usage: scripts/nodes.sh COMMAND
#   up      start the five nodes (redis-server is installed first when it is
#           missing: scripts/install-redis.sh); starts none and fails if
#           another process holds one of the ports
#   down    stop the five nodes and remove their directory; always succeeds
#   status  each node's state; fails unless all five are up
#   nodes   print redis://127.0.0.1:7001,...,redis://127.0.0.1:7005 (the
#           value for QUORUMLOCK_NODES, which the CLI and the demos read)
#
# Environment:
#   QUORUMLOCK_NODES_DIR  the nodes' directory (default
#                         ${TMPDIR:-/tmp}/quorumlock-nodes-$UID, mode 700)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORTS=(7001 7002 7003 7004 7005)
DIR="${QUORUMLOCK_NODES_DIR:-${TMPDIR:-/tmp}/quorumlock-nodes-$(id -u)}"

log() { printf '[nodes] %s\n' "$*" >&2; }

usage() {
    sed -n '/^# Usage/,/^# Environment/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# Prints the pid of this script's node on port $1; fails if it does not run.
pid_of() {
    local pid
    pid="$(cat "$DIR/$1/redis.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server" || return 1
    echo "$pid"
}

# Whether anything accepts connections on 127.0.0.1:$1.
listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Whether a Redis server on 127.0.0.1:$1 answers PING.
answers() {
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1"
        printf 'PING\r\n' >&3
        IFS= read -r -t 2 reply <&3
        [ "${reply%$'\r'}" = "+PONG" ]
    ) 2>/dev/null
}

# Who holds port $1, when `ss` can tell.
holder() {
    command -v ss >/dev/null 2>&1 || return 0
    ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'users:.*' | head -n 1
}

urls() {
    local port out=()
    for port in "${PORTS[@]}"; do
        out+=("redis://127.0.0.1:$port")
    done
    (IFS=,; echo "${out[*]}")
}

up() {
    "$HERE/install-redis.sh" >&2
    local port taken=()
    for port in "${PORTS[@]}"; do
        if ! pid_of "$port" >/dev/null && listening "$port"; then
            taken+=("$port")
        fi
    done
    if [ "${#taken[@]}" -gt 0 ]; then
        for port in "${taken[@]}"; do
            local by
            by="$(holder "$port")"
            log "port $port is taken by another process${by:+: $by}"
        done
        log "no node started: free the port(s) (docker/cluster.sh down, if the Docker nodes hold them)"
        exit 1
    fi
    mkdir -p -m 700 "$DIR"
    chmod 700 "$DIR"
    for port in "${PORTS[@]}"; do
        if pid_of "$port" >/dev/null; then
            log "127.0.0.1:$port is already up"
            continue
        fi
        mkdir -p "$DIR/$port"
        redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
            --dir "$DIR/$port" --pidfile "$DIR/$port/redis.pid" --logfile "$DIR/$port/redis.log" \
            --save "" --appendonly no
    done
    for port in "${PORTS[@]}"; do
        local tries=0
        until pid_of "$port" >/dev/null && answers "$port"; do
            tries=$((tries + 1))
            if [ "$tries" -gt 100 ]; then
                log "127.0.0.1:$port did not start; the end of $DIR/$port/redis.log:"
                tail -n 5 "$DIR/$port/redis.log" >&2 || true
                log "stop the others with: $0 down"
                exit 1
            fi
            sleep 0.1
        done
    done
    log "five nodes up in $DIR; stop them with: $0 down"
    urls
}

down() {
    local port pid pids=()
    for port in "${PORTS[@]}"; do
        if pid="$(pid_of "$port")"; then
            kill "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    for pid in ${pids[@]+"${pids[@]}"}; do
        local tries=0
        while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 100 ]; do
            tries=$((tries + 1))
            sleep 0.1
        done
    done
    rm -rf "$DIR"
    log "${#pids[@]} node(s) stopped"
}

status() {
    local port pid down=0
    for port in "${PORTS[@]}"; do
        if pid="$(pid_of "$port")" && answers "$port"; then
            echo "127.0.0.1:$port up (pid $pid)"
        else
            echo "127.0.0.1:$port down"
            down=$((down + 1))
        fi
    done
    [ "$down" -eq 0 ]
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    nodes) urls ;;
    *) usage ;;
esac
