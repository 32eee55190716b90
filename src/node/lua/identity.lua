-- Which server this is, for restart quarantine: "<run_id>:<replid>" (a
-- new run_id each time a server starts; a new replication id each time a
-- replica is promoted, so a master that was demoted, resynchronized and
-- promoted again is not the server it was) and how long it has been up,
-- in seconds. Read-only.
local server = redis.call('INFO', 'server')
local replication = redis.call('INFO', 'replication')
local run_id = string.match(server, 'run_id:(%w+)') or ''
local replid = string.match(replication, 'master_replid:(%w+)') or ''
local uptime = tonumber(string.match(server, 'uptime_in_seconds:(%d+)') or '-1')
return {run_id .. ':' .. replid, uptime}
