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
-- Lua numbers are doubles, exact below 2^53 only: a T or a counter that is
-- not a canonical integer in [0, 2^53) is refused with a FENCERANGE error.
local function canonical(raw)
    return raw and string.match(raw, "^[0-9]+$") and #raw <= 16
        and not (#raw > 1 and string.sub(raw, 1, 1) == "0")
        and tonumber(raw) < 9007199254740992
end
if not canonical(ARGV[2]) or tonumber(ARGV[2]) < 1 then
    return redis.error_reply("FENCERANGE fencing token is not an integer in [1, 2^53)")
end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
end
local raw = redis.call("GET", KEYS[2])
if raw and not canonical(raw) then
    return redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
end
local counter, fence = tonumber(raw or "0"), tonumber(ARGV[2])
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
