-- Compare-and-pexpire for a lock over several resources: extend only if
-- every key still carries our token; never re-creates an expired key and
-- never shortens a key's time left (see extend.lua).
-- KEYS = resources, ARGV[1] = token, ARGV[2] = TTL in ms. Returns 1 or 0,
-- or -1 when no key carries another token but some are missing.
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
