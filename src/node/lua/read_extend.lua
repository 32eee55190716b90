-- A reader's extension: its own entry only, to expire no sooner than
-- ARGV[2] ms from now (never shortened), the marker kept in step. An
-- expired entry is never re-created here.
-- KEYS[1] = resource, KEYS[2] = readers' entries; ARGV[1] = token,
-- ARGV[2] = TTL in ms. Returns 1 when extended, 0 when a writer holds the
-- resource, -1 when the entry is missing (the client may repair it,
-- docs/repair.md). Changes nothing unless it returns 1.
local now = purge(KEYS[2])
if written(KEYS[1]) then
    return 0
end
local score = redis.call("ZSCORE", KEYS[2], ARGV[1])
if not score then
    return -1
end
local ends = now + tonumber(ARGV[2])
if tonumber(score) < ends then
    redis.call("ZADD", KEYS[2], ends, ARGV[1])
end
mark(KEYS[1], KEYS[2], now)
return 1
