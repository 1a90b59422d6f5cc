#!lua flags=no-writes
-- Members' places on boards, in one call, answered as the JSON of the result:
--   entry    one member on one board: {"rank","member","score","parts"?,"metadata",
--            "percentile","gap_up","total"}, or nil (a nil reply) when the member is not on
--            the board;
--   entries  many members on one board (a friends lookup): a JSON array of the entries
--            {"rank","member","score","parts"?,"metadata"} of the ranked ones, best first
--            (ties in the order asked);
--   history  one member on many boards (its last periods):
--            {"board","window","member","history":[{"period","rank","score","parts"?}]}, rank
--            and score null in a period where it is not ranked;
--   climb    one member on one board and the scores at some ranks:
--            {"board","window","period","member","rank","score","parts"?,"targets":[{"rank",
--            "score","parts"?,"gap"}]}, or nil when the member is not on the board.
-- Scores, gaps and percentiles are written by lib/json.lua json_score; "parts" (the score's
-- composite parts) beside every score of a board with a composite layout.
--
-- KEYS[1] meta hash
-- KEYS[2..] pairs of (live sorted set, archive sorted set); the archive is read when it exists.
--         ties = "earliest": fours of (live, archive, live's reach set, archive's reach set)
--         ties = "dense": fours of (live, archive, live's distinct set, archive's distinct set)
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared|dense|earliest)
-- ARGV[3] shape (entry|entries|history|climb)
-- ARGV[4] the board's composite layout (lib/json.lua parts_layout), or '' for none
-- entry, entries: ARGV[5..] the members, on the board of the first pair
-- history: ARGV[5] board  ARGV[6] window  ARGV[7] member  ARGV[8..] the period id of each pair
-- climb: ARGV[5] board  ARGV[6] window  ARGV[7] period id  ARGV[8] member
--        ARGV[9..] the target ranks (1-based), on the board of the first pair

--! include json
--! include ranks

local desc = ARGV[1] == 'desc'
local shared = ARGV[2] == 'shared'
local dense = ARGV[2] == 'dense'
local earliest = ARGV[2] == 'earliest'
local shape = ARGV[3]
local layout = parts_layout(ARGV[4], 'read_points.lua: ARGV[4]')
local stride = (earliest or dense) and 4 or 2

-- The sorted set of board `pair` (the archive once it exists), and its reach set (earliest)
-- or its distinct set (dense; nil when it has none: lib/ranks.lua walks then).
local function board(pair)
  local at = 2 + stride * (pair - 1)
  local live, archive = KEYS[at], KEYS[at + 1]
  local key, beside = live, KEYS[at + 2]
  if archive ~= live and redis.call('EXISTS', archive) == 1 then
    key, beside = archive, KEYS[at + 3]
  end
  if dense then beside = distinct_set(key, beside) end
  return key, beside
end

-- The 1-based rank of `m`, whose score is `score`, on `key` (`reach`: its reach set or its
-- distinct set, as `board` answers them).
local function rank_of(key, reach, m, score)
  if earliest then
    return earliest_rank(key, reach, desc, m, score)
  elseif shared then
    -- Standard competition ranking: 1 + members with a strictly better score.
    if desc then
      return 1 + redis.call('ZCOUNT', key, '(' .. score, '+inf')
    end
    return 1 + redis.call('ZCOUNT', key, '-inf', '(' .. score)
  elseif dense then
    return dense_rank(key, reach, desc, score)
  elseif desc then
    return 1 + redis.call('ZREVRANK', key, m)
  end
  return 1 + redis.call('ZRANK', key, m)
end

-- The 1-based rank and the score of `m` on `key`, or nil when it is not there.
local function place(key, reach, m)
  local score = redis.call('ZSCORE', key, m)
  if not score then return nil end
  return rank_of(key, reach, m, score), score
end

local function entry(rank, m, score)
  return json_entry(rank, m, score, redis.call('HGET', KEYS[1], m), layout)
end

-- ',"score":<score>' and its parts, for Redis's text of a score.
local function score_field(score)
  return ',"score":' .. score_json(score) .. (layout and json_parts(layout, tonumber(score)) or '')
end

if shape == 'entry' then
  local key, reach = board(1)
  local m = ARGV[5]
  local rank, score = place(key, reach, m)
  if not rank then return false end
  local total = redis.call('ZCARD', key)
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
  local gap = 'null'
  if better then gap = json_score(math.abs(tonumber(better) - tonumber(score))) end
  local plain = entry(rank, m, score)
  return string.sub(plain, 1, -2) .. ',"percentile":' .. json_score(100 * worse / total)
    .. ',"gap_up":' .. gap .. ',"total":' .. total .. '}'
end

if shape == 'entries' then
  local key, reach = board(1)
  local found = {}
  for i = 5, #ARGV do
    local score = redis.call('ZSCORE', key, ARGV[i])
    if score then found[#found + 1] = {0, ARGV[i], score, i} end
  end
  if dense then
    -- Best score first: each rank is the one before + 1 + the distinct scores between the
    -- two (one walk down them all when the board has no distinct set).
    table.sort(found, function(a, b)
      local x, y = tonumber(a[3]), tonumber(b[3])
      if x ~= y then
        if desc then return x > y end
        return x < y
      end
      return a[4] < b[4]
    end)
    local rank, prev, from = 0, nil, desc and '+inf' or '-inf'
    for _, f in ipairs(found) do
      local s = tonumber(f[3])
      if s ~= prev then
        rank = rank + 1 + distinct_before(key, reach, desc, from, f[3])
        prev, from = s, '(' .. f[3]
      end
      f[1] = rank
    end
  elseif earliest then
    local rank = earliest_ranker(key, reach, desc)
    for _, f in ipairs(found) do f[1] = rank(f[2], f[3]) end
  else
    for _, f in ipairs(found) do f[1] = rank_of(key, reach, f[2], f[3]) end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[4] < b[4]
  end)
  local out = {}
  for i = 1, #found do out[i] = entry(found[i][1], found[i][2], found[i][3]) end
  return '[' .. table.concat(out, ',') .. ']'
end

if shape == 'climb' then
  local key, reach = board(1)
  local m = ARGV[8]
  local rank, score = place(key, reach, m)
  if not rank then return false end
  local total, here, out = redis.call('ZCARD', key), tonumber(score), {}
  for i = 9, #ARGV do
    local k = tonumber(ARGV[i])
    local at, gap = 'null', '0'
    if dense then
      -- Dense rank k is reached by tying the k-th distinct score.
      at = nth_distinct(key, reach, desc, k) or 'null'
      if at ~= 'null' and rank > k then gap = json_score(math.abs(tonumber(at) - here)) end
    elseif k <= total then
      if desc then
        at = redis.call('ZRANGE', key, k - 1, k - 1, 'REV', 'WITHSCORES')[2]
      else
        at = redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2]
      end
      if rank > k then gap = json_score(math.abs(tonumber(at) - here)) end
    end
    local there = at == 'null' and ',"score":null' or score_field(at)
    out[#out + 1] = '{"rank":' .. ARGV[i] .. there .. ',"gap":' .. gap .. '}'
  end
  return '{"board":' .. json_string(ARGV[5]) .. ',"window":' .. json_string(ARGV[6])
    .. ',"period":' .. json_string(ARGV[7]) .. ',"member":' .. json_string(m) .. ',"rank":'
    .. rank .. score_field(score) .. ',"targets":[' .. table.concat(out, ',') .. ']}'
end

-- history
local m, out = ARGV[7], {}
for i = 8, #ARGV do
  local key, reach = board(i - 7)
  local rank, score = place(key, reach, m)
  if rank then
    out[#out + 1] = '{"period":' .. json_string(ARGV[i]) .. ',"rank":' .. rank
      .. score_field(score) .. '}'
  else
    out[#out + 1] = '{"period":' .. json_string(ARGV[i]) .. ',"rank":null,"score":null}'
  end
end
return '{"board":' .. json_string(ARGV[5]) .. ',"window":' .. json_string(ARGV[6])
  .. ',"member":' .. json_string(m) .. ',"history":[' .. table.concat(out, ',') .. ']}'
