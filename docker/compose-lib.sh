# Sourced by docker/cluster.sh and docker/topologies.sh: which Compose
# command this host has. `find_compose` sets COMPOSE to `docker compose`
# (the v2 plugin) when it is there, else `docker-compose` (v1); the
# sourcing script defines `die`.
COMPOSE=()
find_compose() {
  if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
  else
    die "neither 'docker compose' nor 'docker-compose' is installed (apt-get install -y docker-compose)"
  fi
}
