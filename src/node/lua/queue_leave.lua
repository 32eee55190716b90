-- A waiter leaves the queue (docs/queue.md): its entry removed. When it
-- was the head, the new head is named on its own channel,
-- quorumlock:next:<id> (the leaver's id as the message): one waiter woken,
-- not all. The PUBLISH runs under pcall, as in release.lua.
-- Returns 1 when the entry was there, 0 otherwise.
purge()
local _, first = head()
local removed = redis.call("ZREM", entries, ARGV[1])
redis.call("ZREM", leases, ARGV[1])
purge()
local _, next = head()
if first == ARGV[1] and next then
    redis.pcall("PUBLISH", "quorumlock:next:" .. next, ARGV[1])
end
return {removed}
