-- Read-only: a read-write lock as peek.lua answers for two keys — 1, the
-- writer: the resource's value and time left, unless it is the readers'
-- marker; 2, the readers: how many entries are live, and the time until
-- the last of them ends. Left out when there is none.
-- KEYS[1] = resource, KEYS[2] = readers' entries. Changes nothing.
local out = {}
local value = redis.call("GET", KEYS[1])
if value and value ~= MARKER then
    out = {1, value, redis.call("PTTL", KEYS[1])}
end
local now = clock()
local live = redis.call("ZCOUNT", KEYS[2], "(" .. now, "+inf")
if live > 0 then
    local last = redis.call("ZRANGE", KEYS[2], -1, -1, "WITHSCORES")
    out[#out + 1] = 2
    out[#out + 1] = tostring(live)
    out[#out + 1] = tonumber(last[2]) - now
end
return out
