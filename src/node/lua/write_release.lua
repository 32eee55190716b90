-- A writer's release of a read-write lock: compare-and-delete of the
-- resource, announced (when ARGV[2] is not "0") on the resource's channel,
-- where writers wait, and on the readers' channel ARGV[3]. The PUBLISHes
-- run under pcall, as in release.lua.
-- KEYS[1] = resource, ARGV[1] = token. Returns 1 when deleted, 0 when the
-- key did not carry the token; negated if the node refused an
-- announcement.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
end
redis.call("DEL", KEYS[1])
if ARGV[2] == "0" then
    return 1
end
local refused = false
for _, channel in ipairs({KEYS[1], ARGV[3]}) do
    local published = redis.pcall("PUBLISH", "quorumlock:released:" .. channel, ARGV[1])
    if type(published) == "table" and published.err then
        refused = true
    end
end
return refused and -1 or 1
