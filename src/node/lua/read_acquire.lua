-- A reader's acquire: an entry for the token that expires ARGV[2] ms from
-- now by the server's clock, unless a writer holds the resource or a
-- waiting writer's intent mark is set. The marker and the entries' key
-- are made to live at least as long as the new entry (they already live
-- as long as the longest other one); expired entries are left for the
-- next purge, which is not needed here: they neither refuse a reader nor
-- lengthen the marker.
-- KEYS[1] = resource, KEYS[2] = readers' entries, KEYS[3] = writer's
-- intent mark; ARGV[1] = token, ARGV[2] = TTL in ms, ARGV[3] = "1" for the
-- repair of a held reader's entry (which the intent mark does not stop).
-- Returns 1 or 0; a repair, OK or nil as SET NX does.
local free = not written(KEYS[1])
if free and ARGV[3] ~= "1" and redis.call("EXISTS", KEYS[3]) == 1 then
    free = false
end
if free then
    local ttl = tonumber(ARGV[2])
    redis.call("ZADD", KEYS[2], "NX", clock() + ttl, ARGV[1])
    if redis.call("PTTL", KEYS[1]) < ttl then
        redis.call("SET", KEYS[1], MARKER, "PX", ttl)
    end
    if redis.call("PTTL", KEYS[2]) < ttl then
        redis.call("PEXPIRE", KEYS[2], ttl)
    end
end
if ARGV[3] == "1" then
    return free and redis.status_reply("OK")
end
return free and 1 or 0
