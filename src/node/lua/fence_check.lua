-- The fencing counter's check, joined in front of every script that reads
-- or raises a counter (acquire_fenced.lua, acquire_slots.lua,
-- fence_commit.lua; see src/node/lua/mod.rs). Lua numbers are doubles,
-- exact below 2^53 only: a counter or token that is not a canonical
-- integer in [0, 2^53) is refused with a FENCERANGE error.
local function canonical(raw)
    return raw and string.match(raw, "^[0-9]+$") and #raw <= 16
        and not (#raw > 1 and string.sub(raw, 1, 1) == "0")
        and tonumber(raw) < 9007199254740992
end
-- What keep_counter stores: each counter read_counter found missing, and
-- the value it started from.
local started = {}
-- The counter at key, or nil and the FENCERANGE error reply. A missing
-- counter (never set, or lost in a restart without persistence) starts
-- from the server's time in microseconds, sec * 10^6 + usec, rounded down
-- to a multiple of 1024 (a semaphore's round, so that nodes a fenced
-- semaphore first reaches within a millisecond start in one round): above
-- every token granted before the loss (docs/fencing.md, "A counter that
-- is lost"). Scripts that call TIME and then write need effects
-- replication (the default since Redis 5).
local function read_counter(key)
    local raw = redis.call("GET", key)
    if not raw then
        local now = redis.call("TIME")
        local micros = tonumber(now[1]) * 1000000 + tonumber(now[2])
        raw = string.format("%.0f", math.floor(micros / 1024) * 1024)
        started[key] = raw
    elseif not canonical(raw) then
        return nil, redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
    end
    return tonumber(raw)
end
-- Stores the counter read_counter started from the time, when it did: an
-- acquire that sets its keys keeps the value it answers, so that the
-- commit reads that value and not a later time.
local function keep_counter(key)
    if started[key] then
        redis.call("SET", key, started[key])
    end
end
