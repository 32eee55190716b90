-- SET NX PX that also reads the resource's fencing counter, atomically.
-- KEYS[1] = resource, KEYS[2] = fencing counter, ARGV[1] = token,
-- ARGV[2] = TTL in ms. Returns the counter (0 if unset) when the key was
-- set, -1 when it exists. Lua numbers are doubles, exact below 2^53 only:
-- a counter that is not a canonical integer in [0, 2^53) is refused with a
-- FENCERANGE error, before anything is set.
local raw = redis.call("GET", KEYS[2])
local counter = 0
if raw then
    if not string.match(raw, "^[0-9]+$") or #raw > 16
        or (#raw > 1 and string.sub(raw, 1, 1) == "0")
        or tonumber(raw) >= 9007199254740992 then
        return redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
    end
    counter = tonumber(raw)
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return counter
else
    return -1
end
