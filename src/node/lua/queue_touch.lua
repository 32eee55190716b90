-- A waiter's heartbeat (docs/queue.md): the lease of ARGV[1]'s entry
-- renewed for ARGV[2] ms, where the entry is still there.
-- Returns {1 when it is (0 otherwise), the lowest live ticket}.
local now = purge()
if not redis.call("ZSCORE", entries, ARGV[1]) then
    return {0, (head())}
end
local lease = tonumber(ARGV[2])
redis.call("ZADD", leases, now + lease, ARGV[1])
keep(lease)
return {1, (head())}
