-- Compare-and-delete: remove the lock only if it still carries our token.
-- KEYS[1] = resource, ARGV[1] = token. Returns 1 if deleted, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
else
    return 0
end
