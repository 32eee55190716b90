-- Compare-and-delete for a lock over several resources: delete each key
-- that still carries our token and wake up its waiters.
-- KEYS = resources, ARGV[1] = token. Returns the number of keys deleted.
local deleted = 0
for _, key in ipairs(KEYS) do
    if redis.call("GET", key) == ARGV[1] then
        redis.call("DEL", key)
        redis.call("PUBLISH", "quorumlock:released:" .. key, "1")
        deleted = deleted + 1
    end
end
return deleted
