#!/usr/bin/env bash
# Installs what the tests and examples need on a fresh Debian/Ubuntu machine:
# redis-server (the tests start their own nodes from it), then the Valkey
# and Redis 6.2 binaries and libfaketime the safety tests use
# (scripts/fetch-servers.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

install_redis() {
    if [ "$(id -u)" -ne 0 ]; then
        SUDO=sudo
    else
        SUDO=
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "redis-server is missing and apt-get is not available; install Redis 6.2+ and put redis-server on PATH" >&2
        exit 1
    fi
    echo "installing redis-server from apt"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
    # The package starts a system-wide instance on 6379; the tests start their
    # own nodes on free ports, so stop it to keep the machine quiet.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
        $SUDO systemctl stop redis-server || true
    fi
}

if command -v redis-server >/dev/null 2>&1; then
    echo "redis-server present: $(redis-server --version | head -n 1)"
else
    install_redis
    redis-server --version | head -n 1
fi

# The paths it prints are the defaults the tests look at; nothing to export.
scripts/fetch-servers.sh >/dev/null
# The virtualenv with redlock-py and aioredlock that tests/interop.rs drives.
scripts/interop-venv.sh >/dev/null
