-- Read-only: an election's leadership lock and leader record, together.
-- KEYS[1] = the leadership lock, KEYS[2] = the leader record. Returns
-- {lock value or nil, record or nil}. Changes nothing.
return {redis.call("GET", KEYS[1]) or false, redis.call("GET", KEYS[2]) or false}
