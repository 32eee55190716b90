-- Second phase of a fenced acquire: raise the counter to T, but only on a
-- node that still holds this lock's token.
-- KEYS[1] = resource, KEYS[2] = fencing counter, ARGV[1] = token,
-- ARGV[2] = T. Returns 1 when committed (counter now >= T), 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
    local current = tonumber(redis.call("GET", KEYS[2]) or "0")
    if current < tonumber(ARGV[2]) then
        redis.call("SET", KEYS[2], ARGV[2])
    end
    return 1
else
    return 0
end
