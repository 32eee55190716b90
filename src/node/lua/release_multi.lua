-- Compare-and-delete for a lock over several resources: delete each key
-- that still carries our token and wake up its waiters.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = "1" to announce, "0" for a
-- silent release (see release.lua).
-- Returns the number of keys deleted, negated if the node refused an
-- announcement (no rights on the channel). As in release.lua, the PUBLISH runs under pcall so that a refusal never hides
-- the DELs that happened.
local deleted = 0
local refused = 0
for _, key in ipairs(KEYS) do
    if redis.call("GET", key) == ARGV[1] then
        redis.call("DEL", key)
        if ARGV[2] ~= "0" then
            local published = redis.pcall("PUBLISH", "quorumlock:released:" .. key, ARGV[1])
            if type(published) == "table" and published.err then
                refused = 1
            end
        end
        deleted = deleted + 1
    end
end
if refused == 1 then
    return -deleted
end
return deleted
