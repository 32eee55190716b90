-- Takes k of a counting semaphore's slots on this node, all or none: the
-- first k free slots in the order given, each set to the token with a TTL
-- (each slot is an ordinary lock key: set only where it is absent) and,
-- for a fenced semaphore, the fencing counter read atomically with them.
-- KEYS[1..n] = the slots in the client's order, then the fencing counter
-- when ARGV[4] = "1"; ARGV[1] = token, ARGV[2] = TTL in ms, ARGV[3] = k.
-- Returns {counter, p1, ..., pk} (the positions in KEYS of the slots set,
-- ascending; the counter is 0 when not fenced) or {-1, free} when fewer
-- than k slots are free (nothing set). The counter is checked as in
-- acquire_fenced.lua: one that is not a canonical integer in [0, 2^53) is
-- refused with a FENCERANGE error, before anything is set.
local n = #KEYS
local counter = 0
if ARGV[4] == "1" then
    n = n - 1
    local raw = redis.call("GET", KEYS[#KEYS])
    if raw then
        if not string.match(raw, "^[0-9]+$") or #raw > 16
            or (#raw > 1 and string.sub(raw, 1, 1) == "0")
            or tonumber(raw) >= 9007199254740992 then
            return redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
        end
        counter = tonumber(raw)
    end
end
local k = tonumber(ARGV[3])
local free = {}
for i = 1, n do
    if redis.call("EXISTS", KEYS[i]) == 0 then
        free[#free + 1] = i
        if #free == k then
            break
        end
    end
end
if #free < k then
    return {-1, #free}
end
local reply = {counter}
for _, i in ipairs(free) do
    redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
    reply[#reply + 1] = i
end
return reply
