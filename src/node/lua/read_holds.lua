-- Read-only check of a reader: is its entry there and unexpired?
-- KEYS[1] = resource, KEYS[2] = readers' entries; ARGV[1] = token.
-- Returns 1 or 0. Changes nothing.
local score = redis.call("ZSCORE", KEYS[2], ARGV[1])
if score and tonumber(score) > clock() then
    return 1
end
return 0
