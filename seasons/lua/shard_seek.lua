#!lua flags=no-writes
-- Where members stand on one shard of a sharded board: what a read of the board merges over
-- its shards (seasons/shard_reads.py). The script only counts and reads.
--
-- KEYS[1] a sorted set: one shard's key of a board's period
-- KEYS[2] its reach set (ties = "earliest" only)
-- ARGV[1] order (desc|asc)
-- ARGV[2] the order of equal scores: 'member' (Redis's, member bytes: ties member and
--         shared) or 'earliest' (the time each reached its score, then member bytes)
-- ARGV[3] rows: how many entries of KEYS[1] to answer around each probe (0: none)
-- ARGV[4] before: of those, how many before the probe's position
-- ARGV[5..] probes: score (Redis's text of it, as ZSCORE answers it), member, reach time
--         (Redis's text of it, 'inf': none; '' unless earliest), ...
-- Returns {card, then for each probe: position, better, equal, nearer, rows, times}:
-- position, the 0-based position the member has (on KEYS[1]) or would have (elsewhere)
-- with that score (and reach time) in the board's order; better and equal, the members of a
-- strictly better and of an equal score; nearer, the nearest strictly better score (false:
-- none); rows, {member, score, ...} of the entries from position - before on in the board's
-- order, at most `rows` of them; times, Redis's text of each row's reach time (earliest;
-- else empty), by which the merge orders equal scores of several shards.

--! include position
--! include ranks

if #ARGV < 4 or #ARGV % 3 ~= 1 then
  error('shard_seek.lua: ARGV: order, ties, rows, before and score/member/time triples, got '
    .. #ARGV, 0)
end
local key, desc, ties = KEYS[1], ARGV[1] == 'desc', ARGV[2]
if ties ~= 'member' and ties ~= 'earliest' then
  error('shard_seek.lua: ARGV[2]: member or earliest, got ' .. tostring(ties), 0)
end
local reach = KEYS[2]
if ties == 'earliest' and not reach then
  error('shard_seek.lua: earliest needs the reach set in KEYS[2]', 0)
end
local want, before = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {redis.call('ZCARD', key)}
for i = 5, #ARGV, 3 do
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
  if ties == 'earliest' then
    -- After the better scores and the equal ones reached before (then member bytes before):
    -- on its own shard, its rank - 1.
    local t = tonumber(ARGV[i + 2]) or math.huge
    position = earliest().insert(key, reach, desc, m, score, t, bytes_less)
  elseif redis.call('ZSCORE', key, m) then
    position = redis.call(desc and 'ZREVRANK' or 'ZRANK', key, m)
  else
    position = redis_position(key, desc, m, score)
  end
  local rows, times = {}, {}
  if want > 0 then
    local from = math.max(0, position - before)
    if ties == 'earliest' then
      local members, scores
      members, scores, times = earliest().slice(key, reach, desc, from, want)
      for k = 1, #members do
        rows[2 * k - 1], rows[2 * k] = members[k], scores[k]
      end
    elseif desc then
      rows = redis.call('ZRANGE', key, from, from + want - 1, 'REV', 'WITHSCORES')
    else
      rows = redis.call('ZRANGE', key, from, from + want - 1, 'WITHSCORES')
    end
  end
  out[#out + 1] = {position, better, equal, nearer or false, rows, times}
end
return out
