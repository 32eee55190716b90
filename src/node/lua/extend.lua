-- Compare-and-pexpire over the lock's keys (one or several): extend only if
-- every key still carries our token. An expired key is never re-created,
-- and a key's time left is never shortened: a key that already lives at
-- least ARGV[2] ms keeps its expiry, so an extension that arrives late
-- (after a later one) cuts nothing short.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = new TTL in milliseconds.
-- A semaphore's permits add their limit L as ARGV[3] and the semaphore's
-- limit record as the last key (never compared): once extended, the record
-- lives at least as long as the slots (set to L where it is missing, never
-- where it holds another limit).
-- Returns 1 if every key carries the token (and now lives at least the new
-- TTL); 0 if a key carries another token; -1 if none carries another token
-- but some are missing (the client may repair them with SET NX,
-- docs/repair.md). Changes nothing unless it returns 1.
local n = #KEYS
if ARGV[3] then
    n = n - 1
end
local missing = false
for i = 1, n do
    local key = KEYS[i]
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
for i = 1, n do
    if redis.call("PTTL", KEYS[i]) < ttl then
        redis.call("PEXPIRE", KEYS[i], ARGV[2])
    end
end
if ARGV[3] then
    local limit = KEYS[#KEYS]
    local recorded = redis.call("GET", limit)
    if (not recorded or recorded == ARGV[3]) and redis.call("PTTL", limit) < ttl then
        redis.call("SET", limit, ARGV[3], "PX", ARGV[2])
    end
end
return 1
