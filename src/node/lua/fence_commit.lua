-- Second phase of a fenced acquire: raise the counter to T, on a node that
-- still holds this lock's token, and only from strictly below T. A node
-- counts for the commit only when it raised its counter to T itself, so
-- two commits of one T can never both reach a majority (docs/fencing.md).
-- KEYS[1] = resource, KEYS[2] = fencing counter, ARGV[1] = token,
-- ARGV[2] = T. Returns 1 when the counter was raised to T (a yes), 0 when
-- the key does not hold the token, -1 when the counter is already >= T.
-- Lua numbers are doubles, exact below 2^53 only: a T or a counter that is
-- not a canonical integer in [0, 2^53) is refused with a FENCERANGE error.
local function canonical(raw)
    return raw and string.match(raw, "^[0-9]+$") and #raw <= 16
        and not (#raw > 1 and string.sub(raw, 1, 1) == "0")
        and tonumber(raw) < 9007199254740992
end
if not canonical(ARGV[2]) or tonumber(ARGV[2]) < 1 then
    return redis.error_reply("FENCERANGE fencing token is not an integer in [1, 2^53)")
end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
end
local raw = redis.call("GET", KEYS[2])
if raw and not canonical(raw) then
    return redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
end
if tonumber(raw or "0") < tonumber(ARGV[2]) then
    redis.call("SET", KEYS[2], ARGV[2])
    return 1
end
return -1
