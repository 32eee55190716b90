-- The fencing counter's check, joined in front of every script that reads
-- or raises a counter (acquire_fenced.lua, acquire_slots.lua,
-- write_acquire.lua, fence_commit.lua; see src/node/lua/mod.rs). Lua
-- numbers are doubles, exact below 2^53 only: a counter or token that is
-- not a canonical integer in [0, 2^53) is refused with a FENCERANGE error.
local function canonical(raw)
    return raw and string.match(raw, "^[0-9]+$") and #raw <= 16
        and not (#raw > 1 and string.sub(raw, 1, 1) == "0")
        and tonumber(raw) < 9007199254740992
end
-- What keep_counter stores: each counter read_counter took from the time,
-- and that value.
local started = {}
-- The counter at key, or nil and the FENCERANGE error reply. A counter
-- that is missing (never set, lost in a restart without persistence), or
-- more than lag microseconds behind the server's time (brought back older
-- by a restart from a snapshot, a failover to a replica behind), reads as
-- that time: sec * 10^6 + usec, rounded down to a multiple of 1024 (a
-- semaphore's round, so that nodes its takers reach within a millisecond
-- read one round). That is above every token granted before
-- (docs/fencing.md, "A counter that is lost", "A counter that comes back
-- older"). A lock's
-- or an election's acquire reads with lag 0; a semaphore's with about a
-- second, so that takers reaching the nodes milliseconds apart read one
-- round; a commit with math.huge (the counter as stored, the time only
-- when it is missing). Scripts that call TIME and then write need effects
-- replication (the default since Redis 5).
local function read_counter(key, lag)
    local raw = redis.call("GET", key)
    if raw and not canonical(raw) then
        return nil, redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
    end
    if raw and lag == math.huge then
        return tonumber(raw)
    end
    local now = redis.call("TIME")
    local micros = tonumber(now[1]) * 1000000 + tonumber(now[2])
    local floor = math.floor(micros / 1024) * 1024
    if raw and tonumber(raw) + lag >= floor then
        return tonumber(raw)
    end
    started[key] = string.format("%.0f", floor)
    return floor
end
-- Stores the counter read_counter took from the time, when it did: an
-- acquire that sets its keys keeps the value it answers, so that the
-- commit reads that value and not a later time.
local function keep_counter(key)
    if started[key] then
        redis.call("SET", key, started[key])
    end
end
