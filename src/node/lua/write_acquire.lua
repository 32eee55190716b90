-- A writer's acquire: SET PX of the resource to the token where no reader
-- entry is left and no writer holds it (a stale marker is replaced); the
-- waiting writers' intent mark is then cleared. Refused by readers, the
-- writer sets the intent mark for ARGV[3] ms: no new reader enters
-- meanwhile. (Refused by a writer, it sets none: readers are out already.)
-- KEYS[1] = resource, KEYS[2] = readers' entries, KEYS[3] = writer's
-- intent mark, KEYS[4] = for a fenced writer, the fencing counter;
-- ARGV[1] = token, ARGV[2] = TTL in ms, ARGV[3] = intent lease in ms.
-- Returns, fenced, the counter (a missing or older one is read as the
-- server's time and stored with the grant) or -1; otherwise 1 or 0. A counter
-- that fence_check.lua refuses is refused before anything is set.
local counter = 1
if KEYS[4] then
    local refused
    counter, refused = read_counter(KEYS[4], 0)
    if refused then
        return refused
    end
end
purge(KEYS[2])
if written(KEYS[1]) then
    return KEYS[4] and -1 or 0
end
if redis.call("EXISTS", KEYS[2]) == 1 then
    redis.call("SET", KEYS[3], ARGV[1], "PX", ARGV[3])
    return KEYS[4] and -1 or 0
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
redis.call("DEL", KEYS[3])
if KEYS[4] then
    keep_counter(KEYS[4])
end
return counter
