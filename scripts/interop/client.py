"""One Redlock operation through a client this project did not write.

    client.py CLIENT ACTION RESOURCE NODES [TTL_MS] [TOKEN]

CLIENT is `redlock-py` or `aioredlock`; ACTION is `lock` (TTL_MS, and
TOKEN for aioredlock, which accepts a caller-chosen identifier) or `unlock`
(TOKEN: the value to release with, right or wrong). NODES is a
comma-separated list of redis:// URLs. Prints one JSON line
{"ok": bool, "token": str|null, "error": str|null} and exits 0; any other
exit status is a failure of the driver itself.

A lock taken here outlives the process: nothing is released at exit
(aioredlock's `destroy()` would release, so it is not called).
"""

import asyncio
import json
import logging
import sys

logging.disable(logging.CRITICAL)


def redlock_py(action, resource, nodes, ttl_ms, token):
    import redlock

    manager = redlock.Redlock(nodes, retry_count=1, retry_delay=0.01)
    if action == "lock":
        lock = manager.lock(resource, ttl_ms)
        if not lock:
            return {"ok": False, "token": None, "error": "not acquired"}
        return {"ok": True, "token": lock.key.decode(), "error": None}
    # redlock-py's unlock is compare-and-delete on every node and reports
    # no ownership mismatch: a wrong token is silently a no-op.
    manager.unlock(redlock.Lock(0, resource, token.encode()))
    return {"ok": True, "token": token, "error": None}


async def aioredlock_op(action, resource, nodes, ttl_ms, token):
    from aioredlock import Aioredlock, Lock, LockError

    manager = Aioredlock(redis_connections=nodes, retry_count=1)
    try:
        if action == "lock":
            lock = await manager.lock(resource, lock_timeout=ttl_ms / 1000.0, lock_identifier=token)
            return {"ok": True, "token": lock.id, "error": None}
        await manager.unlock(Lock(manager, resource, token, valid=True))
        return {"ok": True, "token": token, "error": None}
    except LockError as e:
        return {"ok": False, "token": None, "error": f"{type(e).__name__}: {e}"}
    finally:
        # Close the connections without releasing anything.
        await manager.redis.clear_connections()


def main():
    client, action, resource, nodes = sys.argv[1:5]
    ttl_ms = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else 10_000
    token = sys.argv[6] if len(sys.argv) > 6 else None
    nodes = [n for n in nodes.split(",") if n]
    if action not in ("lock", "unlock") or (action == "unlock" and token is None):
        sys.exit(f"usage: {__doc__}")
    if client == "redlock-py":
        out = redlock_py(action, resource, nodes, ttl_ms, token)
    elif client == "aioredlock":
        out = asyncio.run(aioredlock_op(action, resource, nodes, ttl_ms, token))
    else:
        sys.exit(f"unknown client {client!r}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
