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
-- The counter at key (0 if unset), or nil and the FENCERANGE error reply.
local function read_counter(key)
    local raw = redis.call("GET", key)
    if raw and not canonical(raw) then
        return nil, redis.error_reply("FENCERANGE fencing counter is not an integer in [0, 2^53)")
    end
    return tonumber(raw or "0")
end
