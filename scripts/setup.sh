#!/usr/bin/env bash
# Installs what the tests and examples need on a fresh Debian/Ubuntu machine:
# redis-server (scripts/install-redis.sh; the tests start their own nodes
# from it), then the Valkey and Redis 6.2 binaries and libfaketime the
# safety tests use (scripts/fetch-servers.sh). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-redis.sh

# The paths it prints are the defaults the tests look at; nothing to export.
scripts/fetch-servers.sh >/dev/null
# The virtualenv with redlock-py and aioredlock that tests/interop.rs drives.
scripts/interop-venv.sh >/dev/null
