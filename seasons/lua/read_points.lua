#!lua flags=no-writes
-- Members' places on boards, gathered in one call; the script only reads and ranks,
-- seasons/replies.py writes the JSON of the result. Each reply is a list of named fields:
--   entry    one member on one board: {'rank', r, 'score', s, 'meta', m, 'total', n,
--            'worse', the members strictly worse, 'better', the nearest strictly better
--            score (nil: none)}, or nil (a nil reply) when the member is not on the board;
--   entries  many members on one board (a friends lookup): {'rows', {rank, member, score,
--            meta, ...}} of the ranked ones, best first (ties in the order asked);
--   history  one member on many boards (its last periods): {'places', {rank, score, ...}},
--            one pair per board, both nil where it is not ranked;
--   climb    one member on one board and the scores at some ranks: {'rank', r, 'score', s,
--            'targets', {the score at each target rank, nil where none}}, or nil when the
--            member is not on the board.
-- Scores are Redis's text of them, metadata the stored JSON text (nil: none).
--
-- KEYS[1] meta hash
-- KEYS[2..] pairs of (live sorted set, archive sorted set); the archive is read when it exists.
--         ties = "earliest": fours of (live, archive, live's reach set, archive's reach set)
--         ties = "dense": fours of (live, archive, live's distinct set, archive's distinct set)
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared|dense|earliest)
-- ARGV[3] shape (entry|entries|history|climb)
-- entry, entries: ARGV[4..] the members, on the board of the first pair
-- history: ARGV[4] the member, on the board of each pair
-- climb: ARGV[4] the member  ARGV[5..] the target ranks (1-based), on the board of the first
--        pair

--! include ranks

local desc = ARGV[1] == 'desc'
local ties = ARGV[2]
local shape = ARGV[3]
-- Boards of a rule that keeps a set beside them come with theirs (KEYS above).
local stride = tie_side(ties) and 4 or 2

-- The sorted set of board `pair` (the archive once it exists), and the set its tie rule reads
-- it with (lib/ranks.lua's tie_beside: its reach set, its distinct set, or nil).
local function board(pair)
  local at = 2 + stride * (pair - 1)
  local live, archive = KEYS[at], KEYS[at + 1]
  local key, beside = live, KEYS[at + 2]
  if archive ~= live and redis.call('EXISTS', archive) == 1 then
    key, beside = archive, KEYS[at + 3]
  end
  return key, tie_beside(ties, key, beside)
end

-- The 1-based rank and the score of `m` on `key`, or nil when it is not there.
local function place(key, reach, m)
  local score = redis.call('ZSCORE', key, m)
  if not score then return nil end
  return tie_rank(ties, key, reach, desc, m, score), score
end

if shape == 'entry' then
  local key, reach = board(1)
  local m = ARGV[4]
  local rank, score = place(key, reach, m)
  if not rank then return false end
  -- The members strictly worse, and the nearest strictly better score.
  local worse, better
  if desc then
    worse = redis.call('ZCOUNT', key, '-inf', '(' .. score)
    better = redis.call('ZRANGE', key, '(' .. score, '+inf', 'BYSCORE', 'LIMIT', 0, 1,
      'WITHSCORES')[2]
  else
    worse = redis.call('ZCOUNT', key, '(' .. score, '+inf')
    better = redis.call('ZRANGE', key, '(' .. score, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1,
      'WITHSCORES')[2]
  end
  return {'rank', rank, 'score', score, 'meta', redis.call('HGET', KEYS[1], m),
    'total', redis.call('ZCARD', key), 'worse', worse, 'better', better or false}
end

if shape == 'entries' then
  local key, reach = board(1)
  local found = {}
  for i = 4, #ARGV do
    local score = redis.call('ZSCORE', key, ARGV[i])
    if score then found[#found + 1] = {0, ARGV[i], score, i} end
  end
  tie_ranks(ties, key, reach, desc, found)
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[4] < b[4]
  end)
  local rows, metas = {}, {}
  if #found > 0 then
    local members = {}
    for i = 1, #found do members[i] = found[i][2] end
    metas = redis.call('HMGET', KEYS[1], unpack(members))
  end
  for i = 1, #found do
    local f = found[i]
    rows[4 * i - 3], rows[4 * i - 2], rows[4 * i - 1], rows[4 * i] = f[1], f[2], f[3], metas[i]
  end
  return {'rows', rows}
end

if shape == 'climb' then
  local key, reach = board(1)
  local m = ARGV[4]
  local rank, score = place(key, reach, m)
  if not rank then return false end
  local total, out = redis.call('ZCARD', key), {}
  for i = 5, #ARGV do
    out[i - 4] = tie_nth(ties, key, reach, desc, tonumber(ARGV[i]), total)
  end
  return {'rank', rank, 'score', score, 'targets', out}
end

-- history
local m, out = ARGV[4], {}
for i = 1, (#KEYS - 1) / stride do
  local key, reach = board(i)
  local rank, score = place(key, reach, m)
  out[2 * i - 1], out[2 * i] = rank or false, score or false
end
return {'places', out}
