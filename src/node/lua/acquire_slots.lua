-- Takes k of a counting semaphore's slots on this node, all or none: the
-- first k free slots in the order given, each set to the token with a TTL
-- (each slot is an ordinary lock key: set only where it is absent) and,
-- for a fenced semaphore, the fencing counter read atomically with them.
-- KEYS[1..L] = the slots in the client's order, then the semaphore's limit
-- record, then the fencing counter when ARGV[4] = "1"; ARGV[1] = token,
-- ARGV[2] = TTL in ms, ARGV[3] = k. The client's limit is L, the number of
-- slots listed; the record holds the L its holders named, and lives at
-- least as long as any slot set here.
-- Returns {counter, p1, ..., pk} (the positions in KEYS of the slots set,
-- ascending; the counter is 0 when not fenced; a missing one, or one more
-- than 2^20 us behind the server's time, is read as that time and stored
-- with the slots, the round key left as it is), {-1, free} when fewer
-- than k slots are free (nothing set), or {-2, recorded} when the record
-- holds another limit (nothing set). A counter that fence_check.lua
-- refuses is refused before anything is set.
local n = #KEYS
local counter = 0
if ARGV[4] == "1" then
    n = n - 1
    local refused
    counter, refused = read_counter(KEYS[#KEYS], 1048576)
    if refused then
        return refused
    end
end
local limit = KEYS[n]
n = n - 1
local recorded = redis.call("GET", limit)
if recorded and recorded ~= tostring(n) then
    return {-2, tonumber(recorded) or 0}
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
if redis.call("PTTL", limit) < tonumber(ARGV[2]) then
    redis.call("SET", limit, n, "PX", ARGV[2])
end
keep_counter(KEYS[#KEYS]) -- only a fenced counter read_counter took from the time
local reply = {counter}
for _, i in ipairs(free) do
    redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
    reply[#reply + 1] = i
end
return reply
