-- All-or-nothing SET NX PX over several resources: set every key to our
-- token, or none if any of them exists.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = TTL in ms. Returns 1 or 0.
for _, key in ipairs(KEYS) do
    if redis.call("EXISTS", key) == 1 then
        return 0
    end
end
for _, key in ipairs(KEYS) do
    redis.call("SET", key, ARGV[1], "PX", ARGV[2])
end
return 1
