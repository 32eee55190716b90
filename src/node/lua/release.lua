-- Compare-and-delete over the lock's keys (one or several): delete each key
-- that still carries our token and, when asked to, wake up the waiters on
-- its channel. The announcement carries the released token (of no use once
-- the key is gone), so that a waiter subscribed on every node counts one
-- release once.
-- KEYS = resources, ARGV[1] = token, ARGV[2] = "1" to announce the release,
-- "0" for a silent one (the cleanup of an attempt that lost to a holder:
-- waking the waiters then would only send them to that holder).
-- ARGV[3], when given, names the one channel to announce on instead of
-- each key's own (a semaphore's slots: its waiters wait for any of them),
-- announced once when a key was deleted. ARGV[4] = "1" when the last key
-- is a semaphore's limit record (the keys before it are then every slot):
-- deleted when no slot is left.
-- Returns the number of keys deleted (0 when none carried the token),
-- negated if the node refused an announcement (one integer: the cheapest
-- reply to read).
-- The PUBLISH runs under pcall: a user without rights on the channel (the
-- Redis 7 default for new ACL users) must still be able to release. Scripts
-- are not rolled back, so a raised error here would report a failure for a
-- DEL that has happened.
local deleted = 0
local refused = false
local function announce(name)
    local published = redis.pcall("PUBLISH", "quorumlock:released:" .. name, ARGV[1])
    if type(published) == "table" and published.err then
        refused = true
    end
end
local n = #KEYS
if ARGV[4] == "1" then
    n = n - 1
end
local left = 0
for i = 1, n do
    local key = KEYS[i]
    local held = redis.call("GET", key)
    if held and held ~= ARGV[1] then
        left = left + 1
    elseif held then
        redis.call("DEL", key)
        deleted = deleted + 1
        if ARGV[2] ~= "0" and not ARGV[3] then
            announce(key)
        end
    end
end
if n < #KEYS and left == 0 then
    redis.call("DEL", KEYS[#KEYS])
end
if ARGV[3] and ARGV[2] ~= "0" and deleted > 0 then
    announce(ARGV[3])
end
if refused then
    return -deleted
end
return deleted
