#!/usr/bin/env bash
# Sentinel groups and a Redis Cluster in Docker (docker-compose.topologies.yml),
# to try quorumlock's redis+sentinel:// and redis+cluster:// members and to
# inject faults by hand. Every address the servers hand out is
# 127.0.0.1:<published port>, reachable from the host.
#
# Usage: docker/topologies.sh COMMAND [ARGS]
#   up sentinel          start groups qa, qb, qc (a master and a replica
#                        each, 127.0.0.1:7101-7106) and three sentinels
#                        (127.0.0.1:26379-26381) afresh; wait until every
#                        replica is in sync and every sentinel knows every
#                        group's replica and the other two sentinels
#   up cluster           start six empty nodes (127.0.0.1:7201-7206) afresh,
#                        create a cluster of 3 masters and 3 replicas, wait
#                        until every node reports cluster_state:ok
#   down                 remove the containers of both profiles, their
#                        volumes, the network and the sentinels' files;
#                        always succeeds
#   urls sentinel        print the three member URLs, comma-separated:
#                        redis+sentinel://127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381/qa,...
#   urls cluster         print redis+cluster://127.0.0.1:7201,...,127.0.0.1:7206
#   status sentinel|cluster
#                        print who is master: what each sentinel says and
#                        each server's role, or the cluster's nodes and slots
#   failover qa|qb|qc    SENTINEL FAILOVER; wait until every answering
#                        sentinel names the new master, the host sees it as
#                        role master, and the old master (if it answers) is
#                        its replica, in sync
#   failover-shard PORT  CLUSTER FAILOVER on the replica at 127.0.0.1:PORT;
#                        wait until it is a master, its old master (if it
#                        answers) its replica, and every node says the
#                        cluster is ok
#   ps                   docker-compose ps for both profiles
#   logs [SERVICE]       the containers' logs (services: qa-1 ... qc-2,
#                        sentinel-1..3, cluster-1..6)
#
# `up` prints the URLs of `urls` when it is done; progress goes to stderr.
#
# Environment:
#   QUORUMLOCK_REDIS_IMAGE  image, chosen as docker/cluster.sh does (unset:
#                           redis:7.4-alpine if present or pullable, else
#                           the local image from docker/build-local-image.sh)
#   QUORUMLOCK_TOPO_CONF    directory for the sentinels' configuration files
#                           (default /tmp/quorumlock-topo)
#   QUORUMLOCK_UP_TIMEOUT   seconds for each wait (default 60)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PROJECT="quorumlock-topo"
NETWORK="quorumlock-topo-net"
LIMIT="${QUORUMLOCK_UP_TIMEOUT:-60}"
export QUORUMLOCK_TOPO_CONF="${QUORUMLOCK_TOPO_CONF:-/tmp/quorumlock-topo}"

NAMES=(qa qb qc)
DATA_PORTS=(7101 7102 7103 7104 7105 7106)
SENTINEL_PORTS=(26379 26380 26381)
CLUSTER_PORTS=(7201 7202 7203 7204 7205 7206)
SENTINEL_SERVICES=(sentinel-anchor qa-1 qa-2 qb-1 qb-2 qc-1 qc-2 sentinel-1 sentinel-2 sentinel-3)
CLUSTER_SERVICES=(cluster-anchor cluster-1 cluster-2 cluster-3 cluster-4 cluster-5 cluster-6)

log() { printf '[topologies] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=docker/compose-lib.sh
. "$HERE/compose-lib.sh"

# compose PROFILE... -- ARGS...
compose() {
  local profiles=()
  while [ "$1" != "--" ]; do profiles+=(--profile "$1"); shift; done
  shift
  (cd "$REPO" && "${COMPOSE[@]}" -p "$PROJECT" -f "$REPO/docker-compose.topologies.yml" "${profiles[@]}" "$@")
}

check_profile() {
  case "${1:-}" in
    sentinel|cluster) ;;
    *) die "expected 'sentinel' or 'cluster', got '${1:-}'" ;;
  esac
}

services() { if [ "$1" = sentinel ]; then echo "${SENTINEL_SERVICES[@]}"; else echo "${CLUSTER_SERVICES[@]}"; fi; }

# One command to the server at 127.0.0.1:PORT, from the host, bounded (a
# paused container would make redis-cli wait for ever). Fails when the
# server does not answer.
cli() {
  local port="$1"; shift
  timeout 3 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null | tr -d '\r'
}

# info_field PORT SECTION FIELD
info_field() { cli "$1" info "$2" | sed -n "s/^$3://p"; }

# The value of KEY in a flat key/value reply (SENTINEL MASTER and the like).
kv() { paste - - | awk -F'\t' -v k="$1" '$1 == k { print $2; exit }'; }

# until_ok WHAT COMMAND...: run COMMAND until it succeeds, at most LIMIT s.
until_ok() {
  local what="$1"; shift
  local deadline=$((SECONDS + LIMIT))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || die "timed out after ${LIMIT}s waiting for $what"
    sleep 0.25
  done
}

all_healthy() {
  local s h
  for s in "$@"; do
    h="$(docker inspect --format '{{ .State.Status }}/{{ if .State.Health }}{{ .State.Health.Status }}{{ end }}' "quorumlock-topo-$s" 2>/dev/null || echo missing/)"
    case "$h" in
      running/healthy) ;;
      exited/*|dead/*|missing/*) die "container quorumlock-topo-$s is ${h%/}" ;;
      *) return 1 ;;
    esac
  done
}

start() {
  local profile="$1" image
  find_compose
  image="$("$HERE/cluster.sh" image)"
  export QUORUMLOCK_REDIS_IMAGE="$image"
  log "starting profile $profile with $image (${COMPOSE[*]})"
  local -a names
  read -r -a names <<<"$(services "$profile")"
  compose "$profile" -- up -d --force-recreate --renew-anon-volumes "${names[@]}" >&2
  if ! (until_ok "healthy containers" all_healthy "${names[@]}"); then
    compose "$profile" -- ps >&2 || true
    compose "$profile" -- logs --tail 20 >&2 || true
    die "profile $profile did not become healthy"
  fi
}

# The sentinels' files: the groups and their timings. Each sentinel rewrites
# its own file (state, epochs, known replicas and sentinels), so each gets a
# directory it can write to; the image runs as uid 999.
write_sentinel_conf() {
  rm -rf "$QUORUMLOCK_TOPO_CONF"
  mkdir -p "$QUORUMLOCK_TOPO_CONF"
  local i n port=7101
  for i in 1 2 3; do
    mkdir -m 0777 "$QUORUMLOCK_TOPO_CONF/sentinel-$i"
  done
  {
    echo "# Written by docker/topologies.sh; the sentinel adds its state below."
    for n in "${NAMES[@]}"; do
      echo "sentinel monitor $n 127.0.0.1 $port 2"
      echo "sentinel down-after-milliseconds $n 1000"
      echo "sentinel failover-timeout $n 3000"
      echo "sentinel parallel-syncs $n 1"
      port=$((port + 2))
    done
  } >"$QUORUMLOCK_TOPO_CONF/sentinel-1/sentinel.conf"
  for i in 2 3; do
    cp "$QUORUMLOCK_TOPO_CONF/sentinel-1/sentinel.conf" "$QUORUMLOCK_TOPO_CONF/sentinel-$i/"
  done
  chmod 0666 "$QUORUMLOCK_TOPO_CONF"/sentinel-*/sentinel.conf
}

replicas_in_sync() {
  local port
  for port in 7102 7104 7106; do
    [ "$(info_field "$port" replication master_link_status)" = up ] || return 1
  done
}

# Every sentinel sees every group's master up, its one replica in sync, and
# the two other sentinels: only then can any of them fail a group over.
sentinels_complete() {
  local s n m r
  for s in "${SENTINEL_PORTS[@]}"; do
    for n in "${NAMES[@]}"; do
      m="$(cli "$s" sentinel master "$n")" || return 1
      r="$(cli "$s" sentinel replicas "$n")" || return 1
      [ "$(kv flags <<<"$m")" = master ] && [ "$(kv num-slaves <<<"$m")" = 1 ] \
        && [ "$(kv num-other-sentinels <<<"$m")" = 2 ] && [ "$(kv flags <<<"$r")" = slave ] \
        && [ "$(kv master-link-status <<<"$r")" = ok ] || return 1
    done
  done
}

up_sentinel() {
  write_sentinel_conf
  start sentinel
  until_ok "the replicas to be in sync" replicas_in_sync
  until_ok "every sentinel to know every replica and the other sentinels" sentinels_complete
  log "sentinel groups ready after ${SECONDS}s"
  status_sentinel >&2
}

cluster_ok() {
  local port
  for port in "${CLUSTER_PORTS[@]}"; do
    local info
    info="$(cli "$port" cluster info)" || return 1
    grep -qx 'cluster_state:ok' <<<"$info" && grep -qx 'cluster_known_nodes:6' <<<"$info" \
      && grep -qx 'cluster_slots_ok:16384' <<<"$info" || return 1
    if [ "$(info_field "$port" replication role)" = slave ]; then
      [ "$(info_field "$port" replication master_link_status)" = up ] || return 1
    fi
  done
}

up_cluster() {
  start cluster
  local seeds=() port
  for port in "${CLUSTER_PORTS[@]}"; do seeds+=("127.0.0.1:$port"); done
  log "redis-cli --cluster create ${seeds[*]} --cluster-replicas 1"
  # All nodes are on 127.0.0.1, so redis-cli warns that replicas share their
  # master's host; that is the point here.
  timeout "$LIMIT" redis-cli --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes \
    | sed 's/\x1b\[[0-9;]*m//g' >&2 || die "redis-cli --cluster create failed"
  until_ok "cluster_state:ok on every node" cluster_ok
  log "cluster ready after ${SECONDS}s"
  status_cluster >&2
}

cmd_down() {
  if find_compose 2>/dev/null; then
    compose sentinel cluster -- down -v --remove-orphans --timeout 2 >&2 || true
  fi
  # Whatever compose left (no compose tool, containers started by hand).
  local s
  for s in "${CLUSTER_SERVICES[@]}" "${SENTINEL_SERVICES[@]}"; do
    docker rm -f -v "quorumlock-topo-$s" >/dev/null 2>&1 || true
  done
  docker network rm "$NETWORK" >/dev/null 2>&1 || true
  rm -rf "$QUORUMLOCK_TOPO_CONF" 2>/dev/null || true
  log "down"
}

cmd_urls() {
  check_profile "$1"
  local port hosts=() urls=() n
  if [ "$1" = sentinel ]; then
    for port in "${SENTINEL_PORTS[@]}"; do hosts+=("127.0.0.1:$port"); done
    local IFS=,
    for n in "${NAMES[@]}"; do urls+=("redis+sentinel://${hosts[*]}/$n"); done
    echo "${urls[*]}"
  else
    for port in "${CLUSTER_PORTS[@]}"; do hosts+=("127.0.0.1:$port"); done
    local IFS=,
    echo "redis+cluster://${hosts[*]}"
  fi
}

# The master of group N as ip:port, from the first sentinel that answers.
master_of() {
  local s addr
  for s in "${SENTINEL_PORTS[@]}"; do
    if addr="$(cli "$s" sentinel get-master-addr-by-name "$1" | paste -sd:)" && [ -n "$addr" ]; then
      echo "$addr"; return 0
    fi
  done
  return 1
}

role_of() {
  local port="$1" role
  role="$(info_field "$port" replication role)" || { echo "not answering"; return; }
  if [ "$role" = slave ]; then
    echo "replica of $(info_field "$port" replication master_host):$(info_field "$port" replication master_port), link $(info_field "$port" replication master_link_status)"
  else
    echo "$role"
  fi
}

status_sentinel() {
  local n s port says
  for n in "${NAMES[@]}"; do
    says=()
    for s in "${SENTINEL_PORTS[@]}"; do
      says+=("$(cli "$s" sentinel get-master-addr-by-name "$n" | paste -sd: || true)")
    done
    echo "$n: sentinels 26379/26380/26381 say master ${says[0]:--} ${says[1]:--} ${says[2]:--}"
  done
  for port in "${DATA_PORTS[@]}"; do
    echo "  127.0.0.1:$port $(role_of "$port")"
  done
}

status_cluster() {
  local port nodes=""
  for port in "${CLUSTER_PORTS[@]}"; do
    nodes="$(cli "$port" cluster nodes)" && [ -n "$nodes" ] && break
  done
  [ -n "$nodes" ] || { echo "no cluster node answers"; return; }
  echo "cluster nodes, as 127.0.0.1:$port sees them:"
  # Fields: id addr@bus flags master-id ping pong epoch link slots...
  awk '{ addr[$1] = $2; sub(/@.*/, "", addr[$1]); line[NR] = $0 }
    END {
      for (i = 1; i <= NR; i++) {
        split(line[i], f, " ")
        slots = ""
        for (j = 9; j in f; j++) slots = slots " " f[j]
        who = (f[4] == "-") ? "" : " of " addr[f[4]]
        printf "  %s %s%s, link %s%s\n", addr[f[1]], f[3], who, f[8], slots
      }
    }' <<<"$nodes" | sort
}

# Failover of a Sentinel group.
FAILED_FROM=""
failover_done() {
  local s addr new="" answering=0
  for s in "${SENTINEL_PORTS[@]}"; do
    addr="$(cli "$s" sentinel get-master-addr-by-name "$1" | paste -sd:)" || continue
    answering=$((answering + 1))
    [ "$addr" != "$FAILED_FROM" ] || return 1
    [ -z "$new" ] || [ "$addr" = "$new" ] || return 1
    new="$addr"
  done
  [ "$answering" -ge 2 ] && [ "$(info_field "${new#*:}" replication role)" = master ]
}

old_master_follows() {
  local old_port="${FAILED_FROM#*:}" new="$1"
  [ "$(info_field "$old_port" replication role)" = slave ] \
    && [ "$(info_field "$old_port" replication master_port)" = "${new#*:}" ] \
    && [ "$(info_field "$old_port" replication master_link_status)" = up ]
}

cmd_failover() {
  local n="${1:-}"
  case "$n" in qa|qb|qc) ;; *) die "usage: topologies.sh failover qa|qb|qc" ;; esac
  FAILED_FROM="$(master_of "$n")" || die "no sentinel answers on 127.0.0.1:26379-26381 (is the sentinel profile up?)"
  local s reply=""
  for s in "${SENTINEL_PORTS[@]}"; do
    # An error reply (INPROG, NOGOODSLAVE) makes redis-cli exit 1: keep it.
    if cli "$s" ping >/dev/null; then reply="$(cli "$s" sentinel failover "$n" || true)"; break; fi
  done
  [ "$reply" = OK ] || die "SENTINEL FAILOVER $n on 127.0.0.1:$s: ${reply:-no answer}"
  log "SENTINEL FAILOVER $n: master was $FAILED_FROM"
  until_ok "the sentinels to name a new master of $n" failover_done "$n"
  local new
  new="$(master_of "$n")"
  log "$n: master is now $new (role master from the host) after ${SECONDS}s"
  if cli "${FAILED_FROM#*:}" ping >/dev/null; then
    # Sentinel turns the old master into a replica some seconds after the
    # switch (it waits for its view to settle first).
    until_ok "$FAILED_FROM to become a replica of $new" old_master_follows "$new"
    log "$FAILED_FROM is a replica of $new, in sync, after ${SECONDS}s"
  else
    log "$FAILED_FROM does not answer; the sentinels make it a replica when it is back"
  fi
  status_sentinel >&2
}

# Failover of a cluster shard, from its replica.
shard_done() {
  local port="$1" old="$2" p nodes
  [ "$(info_field "$port" replication role)" = master ] || return 1
  if cli "$old" ping >/dev/null; then
    [ "$(info_field "$old" replication role)" = slave ] \
      && [ "$(info_field "$old" replication master_port)" = "$port" ] \
      && [ "$(info_field "$old" replication master_link_status)" = up ] || return 1
  fi
  for p in "${CLUSTER_PORTS[@]}"; do
    nodes="$(cli "$p" cluster nodes)" || continue
    awk -v a="127.0.0.1:$port@" 'index($2, a) == 1 && $3 ~ /master/ { found = 1 } END { exit !found }' <<<"$nodes" || return 1
    [ "$(cli "$p" cluster info | sed -n 's/^cluster_state://p')" = ok ] || return 1
  done
}

cmd_failover_shard() {
  local port="${1:-}"
  case " ${CLUSTER_PORTS[*]} " in *" $port "*) ;; *) die "usage: topologies.sh failover-shard PORT (a replica's port, 7201-7206)" ;; esac
  local role
  role="$(info_field "$port" replication role)" || die "127.0.0.1:$port does not answer (is the cluster profile up?)"
  if [ "$role" != slave ]; then
    local id
    id="$(cli "$port" cluster myid || true)"
    die "127.0.0.1:$port is a $role; give the port of its replica: $(cli "$port" cluster nodes | awk -v m="$id" '$4 == m { sub(/@.*/, "", $2); print $2 }' | paste -sd' ')"
  fi
  local old
  old="$(info_field "$port" replication master_port)"
  local reply
  reply="$(cli "$port" cluster failover || true)"
  [ "$reply" = OK ] || die "CLUSTER FAILOVER on 127.0.0.1:$port: ${reply:-no answer}"
  log "CLUSTER FAILOVER on 127.0.0.1:$port (replica of 127.0.0.1:$old)"
  until_ok "127.0.0.1:$port to take over from 127.0.0.1:$old" shard_done "$port" "$old"
  log "127.0.0.1:$port is master after ${SECONDS}s"
  status_cluster >&2
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

main() {
  local cmd="${1:-}"
  [ "$#" -gt 0 ] && shift
  case "$cmd" in
    up)
      check_profile "${1:-}"
      command -v redis-cli >/dev/null 2>&1 || die "redis-cli is needed on the host (apt-get install -y redis-tools)"
      if [ "$1" = sentinel ]; then up_sentinel; else up_cluster; fi
      cmd_urls "$1" ;;
    down) cmd_down ;;
    urls) cmd_urls "${1:-}" ;;
    status) check_profile "${1:-}"; "status_$1" ;;
    failover) cmd_failover "${1:-}" ;;
    failover-shard) cmd_failover_shard "${1:-}" ;;
    ps) find_compose; compose sentinel cluster -- ps ;;
    logs) find_compose; compose sentinel cluster -- logs "$@" ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
