-- Compare-and-delete: remove the lock only if it still carries our token,
-- and, when asked to, wake up waiters on the resource's channel. The
-- announcement carries the released token (of no use once the key is gone),
-- so that a waiter subscribed on every node counts one release once.
-- KEYS[1] = resource, ARGV[1] = token, ARGV[2] = "1" to announce the
-- release, "0" for a silent one (the cleanup of an attempt that lost to a
-- holder: waking the waiters then would only send them to that holder).
-- Returns 1 if the key was ours (and is now gone), 0 otherwise, and -1 if
-- it was ours and is gone but the node refused the announcement (one
-- integer: the cheapest reply to read).
-- The PUBLISH runs under pcall: a user without rights on the channel (the
-- Redis 7 default for new ACL users) must still be able to release. Scripts
-- are not rolled back, so a raised error here would report a failure for a
-- DEL that has happened.
if redis.call("GET", KEYS[1]) == ARGV[1] then
    redis.call("DEL", KEYS[1])
    if ARGV[2] == "0" then
        return 1
    end
    local published = redis.pcall("PUBLISH", "quorumlock:released:" .. KEYS[1], ARGV[1])
    if type(published) == "table" and published.err then
        return -1
    end
    return 1
else
    return 0
end
