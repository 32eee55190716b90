#!/usr/bin/env bash
# Puts redis-server on PATH: installs it (and redis-cli) from apt when it is
# missing, on Debian or Ubuntu, and says which version is there. Run by
# scripts/setup.sh and scripts/nodes.sh. Safe to run again.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    echo "redis-server present: $(redis-server --version | head -n 1)"
    exit 0
fi
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
# The package starts a system-wide instance on 6379; the tests and
# scripts/nodes.sh start their own nodes, so stop it to keep the machine quiet.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
    $SUDO systemctl stop redis-server || true
fi
redis-server --version | head -n 1
