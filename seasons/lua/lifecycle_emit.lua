-- Append one lifecycle event to the stream, once per stable event id: a second emit of the
-- same id (a close step redone after a crash, two workers) adds nothing.
--
-- KEYS[1] the lifecycle stream   KEYS[2] its id set (sorted set: event id -> the epoch ms of
--         its stream entry); both in one cluster slot (seasons/keys.py)
-- ARGV[1] event id   ARGV[2] type   ARGV[3] at (ISO 8601 UTC)   ARGV[4] data (JSON object text)
-- ARGV[5] the stream's MAXLEN (approximate: XADD MAXLEN ~)
-- Returns the new entry's stream id, or false when the id is already in the stream.
--
-- The id set is trimmed with the stream: ids whose entry the MAXLEN trim dropped (scored
-- below the oldest entry's time) go too, so it stays as bounded as the stream. A stream that
-- is gone (deleted, or lost by Redis) takes its id set with it.

if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
elseif redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return false
end
local sid = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], '*',
  'id', ARGV[1], 'type', ARGV[2], 'at', ARGV[3], 'data', ARGV[4])
redis.call('ZADD', KEYS[2], tonumber(string.match(sid, '^(%d+)')), ARGV[1])
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.match(oldest[1], '^(%d+)'))
return sid
