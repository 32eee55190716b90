-- Compare-and-delete for a lock over several resources: delete each key
-- that still carries our token and (for a held lock) wake up its waiters.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = "1" to announce, "0" to
-- clean up after a failed attempt (see release.lua). Returns the number of
-- keys deleted.
local deleted = 0
for _, key in ipairs(KEYS) do
    if redis.call("GET", key) == ARGV[1] then
        redis.call("DEL", key)
        if ARGV[2] ~= "0" then
            redis.call("PUBLISH", "quorumlock:released:" .. key, "1")
        end
        deleted = deleted + 1
    end
end
return deleted
