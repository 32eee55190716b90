-- A reader's release: its entry removed, the marker shortened to the
-- longest entry left, or deleted with the last one, which is announced
-- (as release.lua does) on the resource's channel, where writers wait,
-- when ARGV[2] is not "0".
-- KEYS[1] = resource, KEYS[2] = readers' entries; ARGV[1] = token.
-- Returns 1 when the entry was removed, 0 when it was gone; negated if the
-- node refused the announcement.
local now = purge(KEYS[2])
local removed = redis.call("ZREM", KEYS[2], ARGV[1])
if removed == 1 and mark(KEYS[1], KEYS[2], now) and ARGV[2] ~= "0" then
    local published = redis.pcall("PUBLISH", "quorumlock:released:" .. KEYS[1], ARGV[1])
    if type(published) == "table" and published.err then
        return -1
    end
end
return removed
