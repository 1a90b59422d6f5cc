#!lua flags=no-writes
-- Where members stand on one shard of a sharded board: what a read of the board merges over
-- its shards (seasons/shard_reads.py). The script only counts and reads.
--
-- KEYS[1] a sorted set: one shard's key of a board's period
-- ARGV[1] order (desc|asc)
-- ARGV[2] rows: how many entries of KEYS[1] to answer around each probe (0: none)
-- ARGV[3] before: of those, how many before the probe's position
-- ARGV[4..] probes: score (Redis's text of it, as ZSCORE answers it), member, ...
-- Returns {card, then for each probe: position, better, equal, nearer, rows}: position, the
-- 0-based position the member has (on KEYS[1]) or would have (elsewhere) with that score in
-- the board's order (score, then Redis's order of member bytes, reversed on a desc board);
-- better and equal, the members of a strictly better and of an equal score; nearer, the
-- nearest strictly better score (false: none); rows, {member, score, ...} of the entries from
-- position - before on, at most `rows` of them.

--! include position

if #ARGV < 3 or #ARGV % 2 ~= 1 then
  error('shard_seek.lua: ARGV: order, rows, before and score/member pairs, got ' .. #ARGV, 0)
end
local key, desc = KEYS[1], ARGV[1] == 'desc'
local want, before = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {redis.call('ZCARD', key)}
for i = 4, #ARGV, 2 do
  local score, m = ARGV[i], ARGV[i + 1]
  local better, nearer
  if desc then
    better = redis.call('ZCOUNT', key, '(' .. score, '+inf')
    nearer = redis.call('ZRANGE', key, '(' .. score, '+inf', 'BYSCORE', 'LIMIT', 0, 1,
      'WITHSCORES')[2]
  else
    better = redis.call('ZCOUNT', key, '-inf', '(' .. score)
    nearer = redis.call('ZRANGE', key, '(' .. score, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1,
      'WITHSCORES')[2]
  end
  local equal = redis.call('ZCOUNT', key, score, score)
  local position
  if redis.call('ZSCORE', key, m) then
    position = redis.call(desc and 'ZREVRANK' or 'ZRANK', key, m)
  else
    position = redis_position(key, desc, m, score)
  end
  local rows = {}
  if want > 0 then
    local from = math.max(0, position - before)
    if desc then
      rows = redis.call('ZRANGE', key, from, from + want - 1, 'REV', 'WITHSCORES')
    else
      rows = redis.call('ZRANGE', key, from, from + want - 1, 'WITHSCORES')
    end
  end
  out[#out + 1] = {position, better, equal, nearer or false, rows}
end
return out
