-- Compare-and-pexpire: extend the lock only if it still carries our token.
-- An expired key is never re-created, and a key's time left is never
-- shortened: a key that already lives at least ARGV[2] ms keeps its expiry,
-- so an extension that arrives late (after a later one) cuts nothing short.
-- KEYS[1] = resource, ARGV[1] = token, ARGV[2] = new TTL in milliseconds.
-- Returns 1 if the key carries the token (and now lives at least the new
-- TTL), 0 if it carries another token, -1 if it is missing (the client may
-- repair it with SET NX, docs/repair.md).
local held = redis.call("GET", KEYS[1])
if not held then
    return -1
end
if held ~= ARGV[1] then
    return 0
end
if redis.call("PTTL", KEYS[1]) < tonumber(ARGV[2]) then
    redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 1
