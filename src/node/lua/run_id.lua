-- The server's run_id (a new one every time a server starts). Sent right
-- behind a vote on the same connection, it names the server that cast the
-- vote, even through a proxy that hides restarts from the client.
return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
