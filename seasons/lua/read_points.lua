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
-- A hidden or banned member missing from a live key (lib/hidden.lua) answers its self-view
-- there in every shape: where it stands if it alone were visible (a climb's targets stay the
-- visible members' places); in open mode the reply has one more field, 'hidden': 1 (entry,
-- climb), the rows that are such members (entries, 1-based), the boards where it is one
-- (history, 1-based).
--
-- KEYS[1] meta hash   KEYS[2] the board's moderation hash
-- KEYS[3..] threes of (live sorted set, archive sorted set, twin of the live set); the archive
--         is read when it exists; a snapshot names its archive thrice (it has no twin).
--         ties = "earliest": sixes of (live, archive, twin, live's reach set, archive's reach
--         set, twin's reach set)
--         ties = "dense": fives of (live, archive, twin, live's distinct set, archive's
--         distinct set)
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared|dense|earliest)
-- ARGV[3] shape (entry|entries|history|climb)
-- ARGV[4] the size a trimmed board keeps (max_entries of the window; 0: untrimmed)
-- entry, entries: ARGV[5..] the members, on the board of the first group
-- history: ARGV[5] the member, on the board of each group
-- climb: ARGV[5] the member  ARGV[6..] the target ranks (1-based), on the board of the first
--        group

--! include ranks
--! include hidden

local desc = ARGV[1] == 'desc'
local ties = ARGV[2]
local shape = ARGV[3]
local cap = tonumber(ARGV[4])
-- Boards of a rule that keeps a set beside them come with theirs (KEYS above).
local stride = ties == 'earliest' and 6 or (ties == 'dense' and 5 or 3)

-- The sorted set of board `group` (the archive once it exists), the set its tie rule reads
-- it with (lib/ranks.lua's tie_beside: its reach set, its distinct set, or nil), and where a
-- self-view reads: the twin and its reach set (nil when the archive is read).
local function board(group)
  local at = 3 + stride * (group - 1)
  local live, archive = KEYS[at], KEYS[at + 1]
  local key, beside, twin = live, KEYS[at + 3], KEYS[at + 2]
  if twin == live then
    twin = nil
  elseif archive ~= live and redis.call('EXISTS', archive) == 1 then
    key, beside, twin = archive, KEYS[at + 4], nil
  end
  return key, tie_beside(ties, key, beside), twin, KEYS[at + 5]
end

-- The 1-based rank and the score of `m` on `key`, or nil when it is not there.
local function place(key, reach, m)
  local score = redis.call('ZSCORE', key, m)
  if not score then return nil end
  return tie_rank(ties, key, reach, desc, m, score), score
end

if shape == 'entry' then
  local key, reach, twin, twin_reach = board(1)
  local m = ARGV[5]
  local rank, score = place(key, reach, m)
  local total, state
  if rank then
    total = redis.call('ZCARD', key)
  else
    state = twin and redis.call('HGET', KEYS[2], m)
    if not state then return false end
    state = hidden().mode(state)
    rank, score = hidden().view(ties, key, reach, twin, twin_reach, desc, cap, m, false)
    if not rank then return false end
    total = hidden().total(key, cap)
  end
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
  if state then worse = hidden().worse(key, desc, cap, score, worse) end
  local out = {'rank', rank, 'score', score, 'meta', redis.call('HGET', KEYS[1], m),
    'total', total, 'worse', worse, 'better', better or false}
  if state == 'open' then out[13], out[14] = 'hidden', 1 end
  return out
end

if shape == 'entries' then
  local key, reach, twin, twin_reach = board(1)
  local found, missing = {}, {}
  for i = 5, #ARGV do
    local score = redis.call('ZSCORE', key, ARGV[i])
    if score then
      found[#found + 1] = {0, ARGV[i], score, i}
    elseif twin then
      missing[#missing + 1] = i
    end
  end
  tie_ranks(ties, key, reach, desc, found)
  -- Each hidden or banned member named, where it alone would stand (the others' ranks stay
  -- the public ones).
  local open = {}
  if #missing > 0 then
    local names = {}
    for j, i in ipairs(missing) do names[j] = ARGV[i] end
    local states = redis.call('HMGET', KEYS[2], unpack(names))
    for j, i in ipairs(missing) do
      local m = ARGV[i]
      if states[j] then
        local rank, score = hidden().view(ties, key, reach, twin, twin_reach, desc, cap, m,
          false)
        if rank then
          found[#found + 1] = {rank, m, score, i}
          if hidden().mode(states[j]) == 'open' then open[m] = true end
        end
      end
    end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[4] < b[4]
  end)
  local rows, metas, flagged = {}, {}, {}
  if #found > 0 then
    local members = {}
    for i = 1, #found do members[i] = found[i][2] end
    metas = redis.call('HMGET', KEYS[1], unpack(members))
  end
  for i = 1, #found do
    local f = found[i]
    rows[4 * i - 3], rows[4 * i - 2], rows[4 * i - 1], rows[4 * i] = f[1], f[2], f[3], metas[i]
    if open[f[2]] then flagged[#flagged + 1] = i end
  end
  if #flagged > 0 then return {'rows', rows, 'hidden', flagged} end
  return {'rows', rows}
end

if shape == 'climb' then
  local key, reach, twin, twin_reach = board(1)
  local m = ARGV[5]
  local rank, score = place(key, reach, m)
  local state
  if not rank then
    state = twin and redis.call('HGET', KEYS[2], m)
    if not state then return false end
    state = hidden().mode(state)
    rank, score = hidden().view(ties, key, reach, twin, twin_reach, desc, cap, m, false)
    if not rank then return false end
  end
  -- The targets are the visible members' places, whoever asks.
  local total, out = redis.call('ZCARD', key), {}
  for i = 6, #ARGV do
    out[i - 5] = tie_nth(ties, key, reach, desc, tonumber(ARGV[i]), total)
  end
  if state == 'open' then return {'rank', rank, 'score', score, 'targets', out, 'hidden', 1} end
  return {'rank', rank, 'score', score, 'targets', out}
end

-- history
local m, out, state, flagged, missed = ARGV[5], {}, nil, {}, {}
for i = 1, (#KEYS - 2) / stride do
  local key, reach, twin, twin_reach = board(i)
  local rank, score = place(key, reach, m)
  -- On a live public key, the member is visible now: a moderation moves it off every one.
  if rank and twin then state = false end
  if not rank and twin then missed[#missed + 1] = i end
  out[2 * i - 1], out[2 * i] = rank or false, score or false
end
-- Missing from every live board it was looked for on: its state, read once.
if #missed > 0 and state == nil then
  state = redis.call('HGET', KEYS[2], m)
  state = state and hidden().mode(state)
end
if state then
  for _, i in ipairs(missed) do
    local key, reach, twin, twin_reach = board(i)
    local rank, score = hidden().view(ties, key, reach, twin, twin_reach, desc, cap, m, false)
    if rank and state == 'open' then flagged[#flagged + 1] = i end
    out[2 * i - 1], out[2 * i] = rank or false, score or false
  end
end
if #flagged > 0 then return {'places', out, 'hidden', flagged} end
return {'places', out}
