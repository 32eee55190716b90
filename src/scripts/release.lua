-- Compare-and-delete: remove the lock only if it still carries our token,
-- and wake up waiters on the resource's channel.
-- KEYS[1] = resource, ARGV[1] = token. Returns 1 if deleted, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
    redis.call("DEL", KEYS[1])
    redis.call("PUBLISH", "quorumlock:released:" .. KEYS[1], "1")
    return 1
else
    return 0
end
