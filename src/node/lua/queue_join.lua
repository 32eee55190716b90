-- Joins the queue with ticket ARGV[2] (docs/queue.md), as a fencing
-- token's commit counts: only where the counter is below it, raising the
-- counter to it and adding the waiter ARGV[1] with a lease of ARGV[3] ms.
-- A ticket of 0 only reads the counter (the join's first phase); a ticket
-- refused withdraws the waiter's entry of an earlier proposal, if any.
-- Returns {1 when the ticket counts here (0 otherwise), the counter, the
-- lowest live ticket}; an error reply when the counter is not a number.
local now = purge()
local ticket, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
local highest = tonumber(redis.call("GET", counter) or "0")
if not highest then
    return redis.error_reply("QUEUERANGE the waiter queue's ticket counter is not a number")
end
if ticket <= highest then
    -- An earlier (lower) proposal of this waiter's, counted here, is
    -- withdrawn; a later one, counted before this late refusal, stays.
    local earlier = redis.call("ZSCORE", entries, ARGV[1])
    if ticket > 0 and earlier and tonumber(earlier) < ticket then
        redis.call("ZREM", entries, ARGV[1])
        redis.call("ZREM", leases, ARGV[1])
    end
    return {0, highest, (head())}
end
redis.call("SET", counter, ticket, "KEEPTTL")
redis.call("ZADD", entries, ticket, ARGV[1])
redis.call("ZADD", leases, now + lease, ARGV[1])
keep(lease)
return {1, ticket, (head())}
