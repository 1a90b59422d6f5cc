-- Append one entry to the audit trail, at most once per once-id, and remember which member
-- its salted hash stands for.
--
-- KEYS[1] the audit stream   KEYS[2] its members hash (member hash -> member id)
-- KEYS[3] its once-id set (sorted set: once-id -> the epoch ms of its stream entry); all
--         three in one cluster slot (seasons/keys.py)
-- ARGV[1] the stream's MAXLEN (approximate: XADD MAXLEN ~)
-- ARGV[2] once-id, or "" for none   ARGV[3] member hash, or ""   ARGV[4] member id, or ""
--         (empty with a hash: the entry names a member that is being forgotten, so its id is
--         not written, and its mapping is deleted)
-- ARGV[5..] the entry's fields and values, in pairs
-- Returns the new entry's stream id, or false when the once-id is already in the stream.
--
-- The once-id set is trimmed with the stream (ids scored below the oldest entry's time go),
-- as the lifecycle stream's id set is; a stream that is gone takes its once-ids with it.

if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[3])
elseif ARGV[2] ~= '' and redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  return false
end
if ARGV[3] ~= '' then
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  else
    redis.call('HDEL', KEYS[2], ARGV[3])
  end
end
local sid = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 5))
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[3], tonumber(string.match(sid, '^(%d+)')), ARGV[2])
  local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. string.match(oldest[1], '^(%d+)'))
end
return sid
