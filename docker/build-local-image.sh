#!/usr/bin/env bash
# Build a small local Redis image from the Debian redis-server package that is
# installed on this machine, for hosts that cannot pull from an image registry.
#
# The image is FROM scratch and holds only:
#   /usr/bin/redis-server, /usr/bin/redis-cli (for an exec-form healthcheck),
#   exactly the shared libraries `ldd` lists for those two binaries,
#   the dynamic loader, a minimal /etc/passwd and /etc/group, /tmp and /data.
# There is no shell in the image.
#
# Usage: docker/build-local-image.sh [--force]
#   QUORUMLOCK_LOCAL_IMAGE  tag to build (default quorumlock/redis-local:7.0)
#
# Idempotent: if the tag already exists and was built from the same
# redis-server/redis-cli binaries (sha256 recorded in a label), nothing is
# rebuilt. --force rebuilds anyway. Progress goes to stderr; the only line
# on stdout is the image tag, so `tag=$(docker/build-local-image.sh)` works.
set -euo pipefail

TAG="${QUORUMLOCK_LOCAL_IMAGE:-quorumlock/redis-local:7.0}"
FORCE=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

log() { printf '[build-local-image] %s\n' "$*" >&2; }

# The binaries come from Debian: redis-server (server) and redis-tools (cli,
# a dependency of redis-server).
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  log "redis-server or redis-cli missing: installing from apt"
  if [ "$(id -u)" -ne 0 ]; then
    log "need root to apt-get install redis-server"; exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2
  apt-get install -y --no-install-recommends redis-server redis-tools >&2
  # The Debian package starts a system service on port 6379; the image does
  # not need it. Stop it if a service manager is there, ignore otherwise.
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl stop redis-server >/dev/null 2>&1 || true
  fi
fi

SERVER="$(readlink -f "$(command -v redis-server)")"
CLI="$(readlink -f "$(command -v redis-cli)")"
FINGERPRINT="$(cat "$SERVER" "$CLI" | sha256sum | cut -c1-64)"

if [ "$FORCE" -eq 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  have="$(docker image inspect --format '{{ index .Config.Labels "org.quorumlock.redis.sha256" }}' "$TAG")"
  if [ "$have" = "$FINGERPRINT" ]; then
    log "$TAG is up to date"
    echo "$TAG"
    exit 0
  fi
  log "$TAG exists but was built from other binaries: rebuilding"
fi

# Asked through the command name: Debian's redis-server is a symlink to
# redis-check-rdb, and the binary picks its mode from argv[0].
VERSION="$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')"
STAGE="$(mktemp -d "${TMPDIR:-/tmp}/quorumlock-redis-image.XXXXXX")"
cleanup() { rm -rf "$STAGE"; }
trap cleanup EXIT
ROOT="$STAGE/rootfs"
mkdir -p "$ROOT/usr/bin" "$ROOT/etc" "$ROOT/tmp" "$STAGE/owned/data"

install -m 0755 "$SERVER" "$ROOT/usr/bin/redis-server"
install -m 0755 "$CLI" "$ROOT/usr/bin/redis-cli"

# Every library ldd resolves (lines "name => /path (addr)") and the loader
# (a line that starts with an absolute path). Each one is copied to the path
# ldd printed, dereferenced, so the soname path exists in the image even on a
# merged-/usr host where /lib is a symlink.
ldd_out="$(ldd "$SERVER" "$CLI")"
if grep -q 'not found' <<<"$ldd_out"; then
  log "ldd reports a missing library:"; grep 'not found' <<<"$ldd_out" >&2; exit 1
fi
libs="$(awk '
  $2 == "=>" && $3 ~ /^\// { print $3 }
  $1 ~ /^\// && $1 !~ /:$/ { print $1 }' <<<"$ldd_out" | sort -u)"
if [ -z "$libs" ]; then
  log "ldd listed no libraries for $SERVER"; exit 1
fi
while IFS= read -r lib; do
  mkdir -p "$ROOT$(dirname "$lib")"
  cp -L "$lib" "$ROOT$lib"
done <<<"$libs"
log "staged $(wc -l <<<"$libs") libraries"

cat >"$ROOT/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/nonexistent
redis:x:999:999:redis:/data:/nonexistent
nobody:x:65534:65534:nobody:/nonexistent:/nonexistent
PASSWD
cat >"$ROOT/etc/group" <<'GROUP'
root:x:0:
redis:x:999:
nogroup:x:65534:
GROUP
chmod 1777 "$ROOT/tmp"

cat >"$STAGE/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
COPY --chown=999:999 owned/ /
LABEL org.quorumlock.redis.version="$VERSION" \\
      org.quorumlock.redis.sha256="$FINGERPRINT" \\
      org.opencontainers.image.description="redis-server $VERSION from Debian, minimal local image for quorumlock tests"
USER 999:999
WORKDIR /data
EXPOSE 6379
HEALTHCHECK --interval=1s --timeout=1s --start-period=5s --retries=5 \\
  CMD ["redis-cli", "-p", "6379", "ping"]
ENTRYPOINT ["redis-server"]
CMD ["--port", "6379", "--save", "", "--appendonly", "no", "--protected-mode", "no", "--bind", "0.0.0.0"]
DOCKERFILE

old_id="$(docker image inspect --format '{{ .Id }}' "$TAG" 2>/dev/null || true)"
log "building $TAG from redis-server $VERSION"
# Debian's docker.io has no buildx plugin; the classic builder is all a
# FROM scratch image needs, so use it unless buildx is there.
if docker buildx version >/dev/null 2>&1; then
  docker build --quiet -t "$TAG" "$STAGE" >&2
else
  DOCKER_BUILDKIT=0 docker build --quiet -t "$TAG" "$STAGE" 2> >(grep -v -e DEPRECATED -e 'BuildKit is currently disabled' -e 'environment-variable' -e '^$' >&2) >&2
fi

# Smoke test: the server starts in the image and answers PING through the
# image's own redis-cli (no shell involved).
name="quorumlock-image-check-$$"
docker run -d --rm --name "$name" "$TAG" >/dev/null
ok=0
for _ in $(seq 1 50); do
  if [ "$(docker exec "$name" redis-cli -p 6379 ping 2>/dev/null || true)" = "PONG" ]; then
    ok=1; break
  fi
  sleep 0.1
done
# /data must be writable by the redis user (AOF and RDB files go there).
saved="$(docker exec "$name" redis-cli -p 6379 save 2>/dev/null || true)"
docker rm -f "$name" >/dev/null 2>&1 || true
if [ "$ok" -ne 1 ]; then
  log "image $TAG built, but redis-server in it did not answer PING"; exit 1
fi
if [ "$saved" != "OK" ]; then
  log "image $TAG built, but redis-server cannot write to /data"; exit 1
fi
new_id="$(docker image inspect --format '{{ .Id }}' "$TAG")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  # The previous build lost its tag; drop it unless something still uses it.
  docker rmi "$old_id" >/dev/null 2>&1 || true
fi
size="$(docker image inspect --format '{{ .Size }}' "$TAG")"
log "built $TAG ($((size / 1024 / 1024)) MiB), PING and SAVE ok"
echo "$TAG"
