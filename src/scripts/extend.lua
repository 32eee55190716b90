-- Compare-and-pexpire: extend the lock only if it still carries our token.
-- An expired key is never re-created. KEYS[1] = resource, ARGV[1] = token,
-- ARGV[2] = new TTL in milliseconds. Returns 1 if extended, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
    return 0
end
