-- Takes k of a counting semaphore's slots on this node, all or none: the
-- first k free slots in the order given, each set to the token with a TTL
-- (each slot is an ordinary lock key: set only where it is absent) and,
-- for a fenced semaphore, the fencing counter read atomically with them.
-- KEYS[1..n] = the slots in the client's order, then the fencing counter
-- when ARGV[4] = "1"; ARGV[1] = token, ARGV[2] = TTL in ms, ARGV[3] = k.
-- Returns {counter, p1, ..., pk} (the positions in KEYS of the slots set,
-- ascending; the counter is 0 when not fenced) or {-1, free} when fewer
-- than k slots are free (nothing set). A counter that fence_check.lua
-- refuses is refused before anything is set.
local n = #KEYS
local counter = 0
if ARGV[4] == "1" then
    n = n - 1
    local refused
    counter, refused = read_counter(KEYS[#KEYS])
    if refused then
        return refused
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
