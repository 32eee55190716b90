-- Read-only: what each key holds, for a status read (one round trip
-- however many keys). KEYS = the keys read. Returns, for each key that is
-- set, its position (from 1), its value and its time left in milliseconds
-- ({p1, v1, t1, p2, v2, t2, ...}): keys not set are left out, so the reply
-- stays small when few are. A key the node cannot read (a key of another
-- type) gives its error line in place of the value and -3 as its time
-- left (PTTL never answers -3). Changes nothing.
local out = {}
for i, key in ipairs(KEYS) do
    local value = redis.pcall("GET", key)
    if type(value) == "table" then
        out[#out + 1] = i
        out[#out + 1] = value.err
        out[#out + 1] = -3
    elseif value then
        out[#out + 1] = i
        out[#out + 1] = value
        out[#out + 1] = redis.call("PTTL", key)
    end
end
return out
