-- A waiter queue's bookkeeping, joined in front of each of its scripts
-- (see src/node/lua/mod.rs; docs/queue.md). KEYS[1] = the entries (each
-- waiter's id scored by its ticket), KEYS[2] = their leases (each id
-- scored by the server time, in ms, at which it lapses), KEYS[3] = the
-- ticket counter (the highest ticket committed here while the queue is
-- not empty). No client clock.
if redis.replicate_commands then
    redis.replicate_commands()
end
local entries, leases, counter = KEYS[1], KEYS[2], KEYS[3]
-- The server's time in ms.
local function clock()
    local t = redis.call("TIME")
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Drops the waiters whose lease lapsed, and the counter with the last
-- waiter (no live waiter holds a ticket it would order); returns the time.
local function purge()
    local now = clock()
    local lapsed = redis.call("ZRANGEBYSCORE", leases, "-inf", now)
    if #lapsed > 0 then
        redis.call("ZREMRANGEBYSCORE", leases, "-inf", now)
        redis.call("ZREM", entries, unpack(lapsed))
    end
    if redis.call("ZCARD", entries) == 0 then
        redis.call("DEL", leases, counter)
    end
    return now
end
-- The lowest live ticket here (0 when nobody waits) and its waiter.
local function head()
    local first = redis.call("ZRANGE", entries, 0, 0, "WITHSCORES")
    if #first == 0 then
        return 0, nil
    end
    return tonumber(first[2]), first[1]
end
-- Keeps every key of the queue for `lease` ms at least.
local function keep(lease)
    for _, key in ipairs(KEYS) do
        if redis.call("PTTL", key) < lease then
            redis.call("PEXPIRE", key, lease)
        end
    end
end
