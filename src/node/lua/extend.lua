-- Compare-and-pexpire over the lock's keys (one or several): extend only if
-- every key still carries our token. An expired key is never re-created,
-- and a key's time left is never shortened: a key that already lives at
-- least ARGV[2] ms keeps its expiry, so an extension that arrives late
-- (after a later one) cuts nothing short.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = new TTL in milliseconds.
-- Returns 1 if every key carries the token (and now lives at least the new
-- TTL); 0 if a key carries another token; -1 if none carries another token
-- but some are missing (the client may repair them with SET NX,
-- docs/repair.md). Changes nothing unless it returns 1.
local missing = false
for _, key in ipairs(KEYS) do
    local held = redis.call("GET", key)
    if not held then
        missing = true
    elseif held ~= ARGV[1] then
        return 0
    end
end
if missing then
    return -1
end
local ttl = tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
    if redis.call("PTTL", key) < ttl then
        redis.call("PEXPIRE", key, ARGV[2])
    end
end
return 1
