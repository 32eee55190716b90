-- A leader's record, written only where the leadership is still held.
-- KEYS[1] = the election's leadership lock, KEYS[2] = its leader record,
-- ARGV[1] = the leader's token, ARGV[2] = the proclamation's sequence
-- number, ARGV[3] = the record, "<epoch> <seq> <ttl ms> <token> <value>".
-- Returns 1 when the node now carries this proclamation or a later one of
-- the same leader (an earlier one arriving late never overwrites a later
-- one), 0 when the lock does not hold the token (expired, or another
-- leader's). The record has no expiry: readers trust it only where the
-- lock still holds its token, so renewal needs to touch nothing else.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
end
local raw = redis.call("GET", KEYS[2])
if raw then
    local seq, token = string.match(raw, "^%d+ (%d+) %d+ (%x+) ")
    if token == ARGV[1] and tonumber(seq) > tonumber(ARGV[2]) then
        return 1
    end
end
redis.call("SET", KEYS[2], ARGV[3])
return 1
