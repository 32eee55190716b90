-- SET NX PX that also reads the resource's fencing counter, atomically.
-- KEYS[1] = resource, KEYS[2] = fencing counter, ARGV[1] = token,
-- ARGV[2] = TTL in ms. Returns the counter (0 if unset) when the key was
-- set, -1 when it exists.
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return tonumber(redis.call("GET", KEYS[2]) or "0")
else
    return -1
end
