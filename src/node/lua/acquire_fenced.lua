-- SET NX PX that also reads the resource's fencing counter, atomically.
-- KEYS[1] = resource, KEYS[2] = fencing counter, ARGV[1] = token,
-- ARGV[2] = TTL in ms. Returns the counter when the key was set (never
-- below the server's time: a missing or older counter is read as the time,
-- and stored with the key), -1 when it exists. A counter that fence_check.lua refuses is refused before
-- anything is set.
local counter, refused = read_counter(KEYS[2], 0)
if refused then
    return refused
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    keep_counter(KEYS[2])
    return counter
else
    return -1
end
