#!/usr/bin/env bash
# Creates the virtualenv tests/interop.rs drives: two Redlock clients from
# PyPI that this project did not write, redlock-py (sync, redis-py) and
# aioredlock (asyncio, aioredis 1.x), pinned with hashes in
# scripts/interop/requirements.txt. Safe to run again: an up-to-date venv is
# kept (the requirements file is copied into it and compared).
#
# Prints `export QUORUMLOCK_INTEROP_PYTHON=<venv>/bin/python`; the test finds
# the venv at its default path without it.
#
# Venv: ${QUORUMLOCK_CACHE:-$HOME/.cache/quorumlock}/interop-venv
# Python: $QUORUMLOCK_PYTHON, else python3 (3.8 … 3.11: aioredlock 0.7 imports
# distutils, gone in 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${QUORUMLOCK_CACHE:-$HOME/.cache/quorumlock}/interop-venv"
REQS=scripts/interop/requirements.txt
PYTHON="${QUORUMLOCK_PYTHON:-python3}"

log() { echo "interop-venv: $*" >&2; }

if [ -x "$VENV/bin/python" ] && cmp -s "$REQS" "$VENV/requirements.txt"; then
    log "up to date: $VENV"
else
    command -v "$PYTHON" >/dev/null 2>&1 || {
        log "$PYTHON not found: install python3 with venv and pip (Debian: python3-venv)"
        exit 1
    }
    "$PYTHON" -c 'import sys; sys.exit(0 if (3, 8) <= sys.version_info[:2] <= (3, 11) else 1)' || {
        log "$($PYTHON --version) is not 3.8 … 3.11 (aioredlock 0.7 needs distutils); set QUORUMLOCK_PYTHON"
        exit 1
    }
    rm -rf "$VENV"
    log "creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --require-hashes -r "$REQS" >&2
    cp "$REQS" "$VENV/requirements.txt"
fi
"$VENV/bin/python" -c 'import redlock, aioredlock' ||
    { log "the venv at $VENV cannot import redlock and aioredlock"; exit 1; }
echo "export QUORUMLOCK_INTEROP_PYTHON=$VENV/bin/python"
