-- A read-write lock's bookkeeping, joined in front of each of its scripts
-- (see src/node/lua/mod.rs; docs/rwlock.md). The resource's own key holds
-- the writer's token, or MARKER while readers hold, so that a plain
-- SET NX of it fails either way. The readers' entries are a sorted set of
-- reader tokens, each scored by the server time (ms) at which it expires;
-- the marker lives as long as the longest entry. No client clock.
if redis.replicate_commands then
    redis.replicate_commands()
end
local MARKER = "quorumlock:rwlock:readers"
-- The server's time in ms.
local function clock()
    local t = redis.call("TIME")
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Drops the expired reader entries; returns the time they were dropped at.
local function purge(readers)
    local now = clock()
    redis.call("ZREMRANGEBYSCORE", readers, "-inf", now)
    return now
end
-- True when the resource is held by a writer (or by a lock of another
-- client): any value but the readers' marker.
local function written(name)
    local held = redis.call("GET", name)
    return held and held ~= MARKER
end
-- Keeps the marker in step with the entries left at `now`: it (and the
-- entries' key) lives as long as the longest entry, and is deleted when
-- none is left; then returns true. A resource that holds another value
-- is never touched.
local function mark(name, readers, now)
    if written(name) then
        return false
    end
    local last = redis.call("ZRANGE", readers, -1, -1, "WITHSCORES")
    if #last == 0 then
        redis.call("DEL", name)
        return true
    end
    local left = tonumber(last[2]) - now
    redis.call("SET", name, MARKER, "PX", left)
    redis.call("PEXPIRE", readers, left)
    return false
end
