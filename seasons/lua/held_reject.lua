-- Reject a held event (docs/writes.md#held-events): its record is marked rejected, so it is
-- never applied, and kept as long as decided records are (then dropped by a write).
--
-- KEYS[1] the board's held records (hash event id -> JSON, "state" first)
-- KEYS[2] the board's held order (sorted set event id -> arrival, of those still held)
-- KEYS[3] the board's decided ones (sorted set event id -> when decided)
-- ARGV[1] the event id   ARGV[2] now, epoch seconds   ARGV[3] EXPIREAT of KEYS[3]
-- Returns {'rejected', the record as it was} or {'not_held', its state or nil} (decided
-- already, or no such record): then nothing was written.

local id, now = ARGV[1], ARGV[2]
local record = redis.call('HGET', KEYS[1], id)
if not record then return {'not_held', false} end
local state = cjson.decode(record).state
if state ~= 'held' then return {'not_held', state} end
local rest = record:sub(#'{"state":"held",' + 1)
redis.call('HSET', KEYS[1], id, '{"state":"rejected","decided_at":' .. now .. ',' .. rest)
redis.call('ZREM', KEYS[2], id)
redis.call('ZADD', KEYS[3], now, id)
redis.call('EXPIREAT', KEYS[3], ARGV[3])
return {'rejected', record}
