-- Which server this is, for restart quarantine: "<run_id>:<replid>" (a
-- new run_id each time a server starts; a new replication id each time a
-- replica is promoted, so a master that was demoted, resynchronized and
-- promoted again is not the server it was), how long it has been up, in
-- seconds, and whether it was promoted since it started (a
-- second_repl_offset is kept from the promotion on). Read-only.
local server = redis.call('INFO', 'server')
local replication = redis.call('INFO', 'replication')
local run_id = string.match(server, 'run_id:(%w+)') or ''
local replid = string.match(replication, 'master_replid:(%w+)') or ''
local uptime = tonumber(string.match(server, 'uptime_in_seconds:(%d+)') or '-1')
local second = tonumber(string.match(replication, 'second_repl_offset:(%-?%d+)') or '-1')
local promoted = 0
if second >= 0 then
    promoted = 1
end
return {run_id .. ':' .. replid, uptime, promoted}
