-- Compare-and-delete: remove the lock only if it still carries our token,
-- and, for the release of a lock that was held, wake up waiters on the
-- resource's channel.
-- KEYS[1] = resource, ARGV[1] = token, ARGV[2] = "1" to announce the
-- release, "0" to clean up after a failed attempt (no lock was held, so
-- nobody is woken: a split vote among many waiters would otherwise wake
-- them all again at once). Returns 1 if deleted, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
    redis.call("DEL", KEYS[1])
    if ARGV[2] ~= "0" then
        redis.call("PUBLISH", "quorumlock:released:" .. KEYS[1], "1")
    end
    return 1
else
    return 0
end
