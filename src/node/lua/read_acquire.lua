-- A reader's acquire: an entry for the token that expires ARGV[2] ms from
-- now by the server's clock, unless a writer holds the resource or a
-- waiting writer's intent mark is set.
-- KEYS[1] = resource, KEYS[2] = readers' entries, KEYS[3] = writer's
-- intent mark; ARGV[1] = token, ARGV[2] = TTL in ms, ARGV[3] = "1" for the
-- repair of a held reader's entry (which the intent mark does not stop).
-- Returns 1 or 0; a repair, OK or nil as SET NX does.
local now = purge(KEYS[2])
local free = not written(KEYS[1])
if free and ARGV[3] ~= "1" and redis.call("EXISTS", KEYS[3]) == 1 then
    free = false
end
if free then
    redis.call("ZADD", KEYS[2], "NX", now + tonumber(ARGV[2]), ARGV[1])
    mark(KEYS[1], KEYS[2], now)
end
if ARGV[3] == "1" then
    return free and redis.status_reply("OK")
end
return free and 1 or 0
