-- Second phase of a fenced acquire: raise the counter to T, on a node that
-- still holds this lock's token. A node counts for the commit only when it
-- is the first to commit T there, so two commits of one T can never both
-- reach a majority (docs/fencing.md).
-- KEYS[1] = resource (a permit holder's first slot), KEYS[2] = fencing
-- counter, KEYS[3] = for a semaphore's permit, the round key; ARGV[1] =
-- token, ARGV[2] = T. Returns 1 (a yes), 0 when the key does not hold the
-- token, -1 (a no, nothing changed) otherwise.
-- A lock's T counts where the counter is below T, and sets it to T.
-- A permit's T = r * 1024 + s (r the round, s the slot); the round key holds
-- the slots committed in the counter's round (floor(counter / 1024)), one
-- bit each. T counts where the counter's round is below r (counter set to
-- T, the round key to just s), or is r with the round key present and s not
-- in it (s added, the counter raised to T if below); never where the round
-- passed r, s was committed in it, or the round key is missing.
-- The counter is read as stored, never lifted to the time as an acquire
-- reads it: the acquire stored what it read, and T is above that. A T or
-- a counter that fence_check.lua refuses is refused with a FENCERANGE
-- error (a T of 0 too).
if not canonical(ARGV[2]) or tonumber(ARGV[2]) < 1 then
    return redis.error_reply("FENCERANGE fencing token is not an integer in [1, 2^53)")
end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
end
local counter, refused = read_counter(KEYS[2], math.huge)
if refused then
    return refused
end
local fence = tonumber(ARGV[2])
if not KEYS[3] then
    if counter < fence then
        redis.call("SET", KEYS[2], ARGV[2])
        return 1
    end
    return -1
end
local round, slot = math.floor(fence / 1024), fence % 1024
local current = math.floor(counter / 1024)
if current < round then
    redis.call("SET", KEYS[2], ARGV[2])
    redis.call("DEL", KEYS[3])
    redis.call("SETBIT", KEYS[3], slot, 1)
    return 1
end
if current == round and redis.call("EXISTS", KEYS[3]) == 1
    and redis.call("GETBIT", KEYS[3], slot) == 0 then
    redis.call("SETBIT", KEYS[3], slot, 1)
    if fence > counter then
        redis.call("SET", KEYS[2], ARGV[2])
    end
    return 1
end
return -1
