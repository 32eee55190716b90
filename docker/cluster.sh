#!/usr/bin/env bash
# Five independent Redis nodes for quorumlock's tests (docker-compose.yml).
#
# Usage: docker/cluster.sh COMMAND [ARGS]
#   up              start all five nodes afresh (containers recreated, data
#                   empty) and wait until every one is healthy
#   down            stop and remove the containers, their anonymous volumes,
#                   the network and any partition rule; always succeeds
#   ps              show the five services
#   nodes           print redis://127.0.0.1:7001,...,redis://127.0.0.1:7005
#                   (the value for QUORUMLOCK_TEST_NODES)
#   wait [N...]     wait until the given nodes (default all) are healthy
#   partition N...  cut the host off from node N (1-5): packets from the host
#                   to 127.0.0.1:700N are dropped, so connects and requests
#                   hang, as in a real network partition; needs root
#   heal [N...]     remove the partition of the given nodes (default all)
#   logs [N]        print the nodes' logs
#   image           print the image `up` would use, building it if needed
#
# Environment:
#   QUORUMLOCK_REDIS_IMAGE   image for the nodes. Unset: redis:7.4-alpine if
#                            it is present or can be pulled, else the local
#                            image from docker/build-local-image.sh
#   QUORUMLOCK_AOF=1         add docker-compose.aof.yml (AOF, appendfsync always)
#   QUORUMLOCK_UP_TIMEOUT    seconds to wait for health (default 60)
#   QUORUMLOCK_PULL_TIMEOUT  seconds to allow `docker pull` (default 60)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PROJECT="quorumlock"
NETWORK="quorumlock-net"
DEFAULT_IMAGE="redis:7.4-alpine"
NODES=(1 2 3 4 5)
BASE_PORT=7000
RULE_COMMENT="quorumlock-partition"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

container() { echo "quorumlock-redis$1"; }
port() { echo $((BASE_PORT + $1)); }

check_node() {
  case "$1" in
    1|2|3|4|5) ;;
    *) die "no node '$1' (nodes are 1 to 5)" ;;
  esac
}

# shellcheck source=docker/compose-lib.sh
. "$HERE/compose-lib.sh"

compose() {
  local files=(-f "$REPO/docker-compose.yml")
  if [ "${QUORUMLOCK_AOF:-0}" = "1" ]; then
    files+=(-f "$REPO/docker-compose.aof.yml")
  fi
  (cd "$REPO" && "${COMPOSE[@]}" -p "$PROJECT" "${files[@]}" "$@")
}

# Print the image to use; build the local one when nothing else is available.
choose_image() {
  if [ -n "${QUORUMLOCK_REDIS_IMAGE:-}" ]; then
    if ! docker image inspect "$QUORUMLOCK_REDIS_IMAGE" >/dev/null 2>&1; then
      log "$QUORUMLOCK_REDIS_IMAGE is not present locally; compose will try to pull it"
    fi
    echo "$QUORUMLOCK_REDIS_IMAGE"
    return
  fi
  if docker image inspect "$DEFAULT_IMAGE" >/dev/null 2>&1; then
    echo "$DEFAULT_IMAGE"
    return
  fi
  log "trying: docker pull $DEFAULT_IMAGE"
  if timeout "${QUORUMLOCK_PULL_TIMEOUT:-60}" docker pull -q "$DEFAULT_IMAGE" >/dev/null 2>&1; then
    echo "$DEFAULT_IMAGE"
    return
  fi
  log "cannot pull $DEFAULT_IMAGE: using the local image built from Debian's redis-server"
  "$HERE/build-local-image.sh"
}

health() {
  docker inspect --format '{{ .State.Status }}/{{ if .State.Health }}{{ .State.Health.Status }}{{ else }}none{{ end }}' \
    "$(container "$1")" 2>/dev/null || echo "missing/none"
}

# wait_healthy TIMEOUT NODE...
wait_healthy() {
  local limit="$1"; shift
  local deadline=$((SECONDS + limit))
  local pending=("$@")
  while :; do
    local still=()
    local n
    for n in "${pending[@]}"; do
      local h
      h="$(health "$n")"
      case "$h" in
        running/healthy) ;;
        exited/*|dead/*|missing/*) die "node $n is $h" ;;
        *) still+=("$n") ;;
      esac
    done
    if [ "${#still[@]}" -eq 0 ]; then
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "not healthy after ${limit}s: nodes ${still[*]}"
      return 1
    fi
    pending=("${still[@]}")
    sleep 0.2
  done
}

# Partition rules live in the host's INPUT chain, on the loopback interface,
# tagged with a comment so that heal/down can find them. Sets RULE.
RULE=()
partition_rule() {
  RULE=(INPUT -i lo -p tcp --dport "$(port "$1")" -m comment --comment "$RULE_COMMENT-$1" -j DROP)
}

have_iptables() { command -v iptables >/dev/null 2>&1; }

heal_node() {
  partition_rule "$1"
  while iptables -C "${RULE[@]}" 2>/dev/null; do
    iptables -D "${RULE[@]}"
  done
}

heal_all() {
  have_iptables || return 0
  local n
  for n in "${NODES[@]}"; do
    heal_node "$n" 2>/dev/null || true
  done
}

cmd_up() {
  find_compose
  local image
  image="$(choose_image)"
  export QUORUMLOCK_REDIS_IMAGE="$image"
  heal_all
  log "starting 5 nodes with $image (${COMPOSE[*]})"
  local start=$SECONDS
  compose up -d --force-recreate --renew-anon-volumes --remove-orphans >&2
  if ! wait_healthy "${QUORUMLOCK_UP_TIMEOUT:-60}" "${NODES[@]}"; then
    compose ps >&2 || true
    compose logs --tail 20 >&2 || true
    die "cluster did not become healthy"
  fi
  log "all 5 nodes healthy after $((SECONDS - start))s"
  cmd_nodes
}

cmd_down() {
  heal_all
  if find_compose 2>/dev/null; then
    compose down -v --remove-orphans --timeout 2 >&2 || true
  fi
  # Whatever compose could not remove (no compose tool, a container renamed
  # or started by hand): remove by name.
  local n
  for n in "${NODES[@]}"; do
    docker rm -f -v "$(container "$n")" >/dev/null 2>&1 || true
  done
  docker network rm "$NETWORK" >/dev/null 2>&1 || true
  log "down"
}

cmd_nodes() {
  local urls=() n
  for n in "${NODES[@]}"; do
    urls+=("redis://127.0.0.1:$(port "$n")")
  done
  local IFS=,
  echo "${urls[*]}"
}

cmd_partition() {
  [ "$#" -gt 0 ] || die "usage: cluster.sh partition N..."
  have_iptables || die "iptables is not installed"
  local n
  for n in "$@"; do
    check_node "$n"
    heal_node "$n"
    partition_rule "$n"
    iptables -I "${RULE[@]}"
    log "node $n partitioned (127.0.0.1:$(port "$n") drops packets)"
  done
}

cmd_heal() {
  have_iptables || die "iptables is not installed"
  if [ "$#" -eq 0 ]; then
    heal_all
    log "all partitions healed"
    return
  fi
  local n
  for n in "$@"; do
    check_node "$n"
    heal_node "$n"
    log "node $n healed"
  done
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

main() {
  local cmd="${1:-}"
  [ "$#" -gt 0 ] && shift
  case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    ps) find_compose; compose ps ;;
    nodes) cmd_nodes ;;
    wait)
      local n nodes=("$@")
      [ "${#nodes[@]}" -gt 0 ] || nodes=("${NODES[@]}")
      for n in "${nodes[@]}"; do check_node "$n"; done
      wait_healthy "${QUORUMLOCK_UP_TIMEOUT:-60}" "${nodes[@]}" ;;
    partition) cmd_partition "$@" ;;
    heal) cmd_heal "$@" ;;
    logs)
      find_compose
      if [ "$#" -gt 0 ]; then check_node "$1"; compose logs "redis$1"; else compose logs; fi ;;
    image) find_compose; choose_image ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
