-- Read-only check: does every key still carry our token?
-- KEYS = the lock's resources, ARGV[1] = token. Returns 1 if all of them
-- do, 0 otherwise. Changes nothing.
for _, key in ipairs(KEYS) do
    if redis.call("GET", key) ~= ARGV[1] then
        return 0
    end
end
return 1
