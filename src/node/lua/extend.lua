-- Compare-and-pexpire over the lock's keys (one or several): extend only if
-- every key still carries our token. An expired key is never re-created,
-- and a key's time left is never shortened: a key that already lives at
-- least ARGV[2] ms keeps its expiry, so an extension that arrives late
-- (after a later one) cuts nothing short.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = new TTL in milliseconds.
-- Returns 1 if every key carries the token (and now lives at least the new
-- TTL), 0 otherwise (and changes nothing).
for _, key in ipairs(KEYS) do
    if redis.call("GET", key) ~= ARGV[1] then
        return 0
    end
end
local ttl = tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
    if redis.call("PTTL", key) < ttl then
        redis.call("PEXPIRE", key, ARGV[2])
    end
end
return 1
