-- A resigning leader's record removed: deleted only where it is still this
-- leader's (a later leader's record is never touched).
-- KEYS[1] = the leader record, ARGV[1] = the leader's token. Returns 1 when
-- deleted, 0 otherwise.
local raw = redis.call("GET", KEYS[1])
if raw and string.match(raw, "^%d+ %d+ %d+ (%x+) ") == ARGV[1] then
    redis.call("DEL", KEYS[1])
    return 1
end
return 0
