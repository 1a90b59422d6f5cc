#!lua flags=no-writes
-- A ranked slice of a board with metadata, in one call: top/page, around a rank, around a member.
--
-- KEYS[1] live sorted set   KEYS[2] archive sorted set (read instead when it exists)
-- KEYS[3] meta hash
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared)  ARGV[3] mode (page|rank|member)
-- ARGV[4] page: offset; rank: 1-based centre rank; member: the member
-- ARGV[5] page: limit; rank and member: size
-- Returns {total, start, first_rank, member, score, meta, ...}: start is the 0-based position
-- of the first entry, first_rank its rank under ARGV[2], meta JSON or false. Mode member
-- returns {total, -1, -1} if the member is not ranked.

local key = KEYS[1]
if redis.call('EXISTS', KEYS[2]) == 1 then key = KEYS[2] end
local desc = ARGV[1] == 'desc'
local shared = ARGV[2] == 'shared'
local mode = ARGV[3]
local total = redis.call('ZCARD', key)

local start, count
if mode == 'page' then
  start, count = tonumber(ARGV[4]), tonumber(ARGV[5])
else
  local size = tonumber(ARGV[5])
  local centre
  if mode == 'rank' then
    centre = tonumber(ARGV[4]) - 1
  else
    centre = desc and redis.call('ZREVRANK', key, ARGV[4]) or redis.call('ZRANK', key, ARGV[4])
    if not centre then return {total, -1, -1} end
  end
  -- Centred on the rank, shifted at either end so that it still holds `size` entries.
  start = math.max(0, math.min(centre - math.floor(size / 2), total - size))
  count = size
end
if count <= 0 or start >= total then return {total, start, start + 1} end

local rows
if desc then
  rows = redis.call('ZRANGE', key, start, start + count - 1, 'REV', 'WITHSCORES')
else
  rows = redis.call('ZRANGE', key, start, start + count - 1, 'WITHSCORES')
end

local first_rank = start + 1
if shared and #rows > 0 then
  -- Standard competition ranking: 1 + members with a strictly better score.
  local s = rows[2]
  if desc then
    first_rank = 1 + redis.call('ZCOUNT', key, '(' .. s, '+inf')
  else
    first_rank = 1 + redis.call('ZCOUNT', key, '-inf', '(' .. s)
  end
end

local members = {}
for i = 1, #rows, 2 do members[#members + 1] = rows[i] end
local metas = {}
if #members > 0 then metas = redis.call('HMGET', KEYS[3], unpack(members)) end

local out = {total, start, first_rank}
for i = 1, #members do
  out[#out + 1] = members[i]
  out[#out + 1] = rows[2 * i]
  out[#out + 1] = metas[i]
end
return out
