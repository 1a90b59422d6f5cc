-- ranks: dense ranks (ties = "dense": 1, 1, 2), which count distinct scores; earliest ranks
-- (ties = "earliest", below), which order equal scores by the time each was reached.
--
-- A sorted set counts members in a score range in O(log n) (ZCOUNT), but not distinct
-- scores: a dense board keeps its distinct scores beside it, in its distinct set (one member
-- per distinct score, the score's text as Redis writes it, scored by it; seasons/keys.py
-- `distinct`), which the writes, rollups, trims, archives, restores, forgets and clears
-- keep exact. A dense rank is then one ZCOUNT of that set, the k-th distinct score one
-- ZRANGE of it: O(log n) whatever the rank.
--
-- A board written before distinct sets existed has none until a write, rollup or archive
-- copy builds it (each builds a missing one from its board before changing anything). A
-- read of such a board walks its distinct scores instead, one ZRANGE BYSCORE jump per
-- distinct score: exact, and linear in the rank.

-- `dist`, the distinct set of `key`, or nil when it is missing (the walk is used then). An
-- empty board has no distinct set and needs none.
local function distinct_set(key, dist)
  if dist and redis.call('EXISTS', dist) == 1 then return dist end
  return nil
end

-- The fallback walk: the distinct scores of `key` from `from` towards `to` (ZRANGE BYSCORE
-- bounds, the better one first: '+inf' .. '-inf' on a desc board), one jump past each.
-- Returns (k, the k-th score) once k distinct scores are seen (`k` nil: never), or (the
-- number seen, nil) at `to`.
local function walk_distinct(key, desc, from, to, k)
  local count = 0
  while true do
    local row
    if desc then
      row = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
    else
      row = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    end
    if #row == 0 then return count, nil end
    count = count + 1
    if count == k then return k, row[2] end
    from = '(' .. row[2]
  end
end

-- The number of distinct scores of `key` strictly better than `score` (Redis's text of a
-- score) and within `from`, a ZRANGE BYSCORE bound on the better side: '+inf' (desc) or
-- '-inf' (asc) for the whole board, '(' .. s for the scores worse than s. `dist`: the
-- board's distinct set, or nil (walk).
local function distinct_before(key, dist, desc, from, score)
  if dist then
    if desc then return redis.call('ZCOUNT', dist, '(' .. score, from) end
    return redis.call('ZCOUNT', dist, from, '(' .. score)
  end
  return (walk_distinct(key, desc, from, '(' .. score, nil))
end

-- The dense rank of `score` on `key`: 1 + the distinct scores strictly better.
local function dense_rank(key, dist, desc, score)
  return 1 + distinct_before(key, dist, desc, desc and '+inf' or '-inf', score)
end

-- The k-th distinct score of `key` from the best (Redis's text of it), or nil when the board
-- has fewer distinct scores: the score that gives dense rank k.
local function nth_distinct(key, dist, desc, k)
  if dist then
    local row
    if desc then
      row = redis.call('ZRANGE', dist, k - 1, k - 1, 'REV')
    else
      row = redis.call('ZRANGE', dist, k - 1, k - 1)
    end
    return row[1]
  end
  local _, score = walk_distinct(key, desc, desc and '+inf' or '-inf', desc and '-inf' or '+inf', k)
  return score
end

-- Earliest ranks (ties = "earliest": 1, 2, 3): among equal scores, the member that reached its
-- score first (the lower time in the board's reach set, member -> epoch seconds) ranks higher,
-- then member bytes ascending, for high-first and low-first boards alike. The board keeps its
-- plain scores, so a position holds the same score as in Redis's order: only the order inside
-- a run of equal scores differs, and it is read from that whole run (ZRANGE BYSCORE s s, then
-- ZMSCORE of the reach set). A rank costs O(log n) plus the size of the run of its score;
-- many members with one score make reads of that score linear in their number.

local EARLIEST_CHUNK = 1000 -- members per ZMSCORE (unpack has a limit)

-- The members of `key` whose score is `score` (Redis's text of it), in Redis's order of
-- equal scores: member bytes ascending.
local function score_run(key, score)
  return redis.call('ZRANGE', key, score, score, 'BYSCORE')
end

-- The members of `key` with a score strictly better than `score`.
local function count_better(key, desc, score)
  if desc then return redis.call('ZCOUNT', key, '(' .. score, '+inf') end
  return redis.call('ZCOUNT', key, '-inf', '(' .. score)
end

-- The reach time of each member of `members` (a number; a member without one, which the
-- writes never leave, counts as reached last).
local function reach_times(reach, members)
  local out = {}
  for from = 1, #members, EARLIEST_CHUNK do
    local upto = math.min(from + EARLIEST_CHUNK - 1, #members)
    local got = redis.call('ZMSCORE', reach, unpack(members, from, upto))
    for i = 1, upto - from + 1 do
      out[from + i - 1] = got[i] and tonumber(got[i]) or math.huge
    end
  end
  return out
end

-- What this call has read of each run of equal scores: key -> score -> {run, times}. An
-- around read ranks its member, then reads the page around it, which starts or ends in the
-- same run.
local earliest_runs = {}

-- The cached entry of the run of `score` on `key`: {members, their reach times or nil when
-- not read yet}.
local function cached_run(key, score)
  local by_key = earliest_runs[key]
  if not by_key then
    by_key = {}
    earliest_runs[key] = by_key
  end
  local found = by_key[score]
  if not found then
    found = {score_run(key, score), nil}
    by_key[score] = found
  end
  return found
end

-- The run of `score` on `key` and the reach time of each of its members (none for a run of
-- one, which has no order to find).
local function read_run(key, reach, score)
  local found = cached_run(key, score)
  if found[2] == nil then found[2] = #found[1] > 1 and reach_times(reach, found[1]) or {} end
  return found[1], found[2]
end

-- count_better, once per key and score in a call (an around read counts its member's score,
-- then the page's first score, often the same).
local better_counts = {}
local function better_of(key, desc, score)
  local by_key = better_counts[key]
  if not by_key then
    by_key = {}
    better_counts[key] = by_key
  end
  local n = by_key[score]
  if n == nil then
    n = count_better(key, desc, score)
    by_key[score] = n
  end
  return n
end

-- `run` (members of one score in member bytes order) in the earliest order, `times` their
-- reach times. A counting sort over the distinct times, which table.sort orders with its
-- built-in comparison of numbers (a Lua comparator function is a call per comparison);
-- members of one time keep their order in `run`, member bytes, without comparing strings (Lua
-- compares them by the server's locale).
local function earliest_sorted(run, times)
  if #run < 2 then return run end
  local next_at, distinct = {}, {}
  for i = 1, #run do
    local t = times[i]
    local c = next_at[t]
    if c then
      next_at[t] = c + 1
    else
      next_at[t] = 1
      distinct[#distinct + 1] = t
    end
  end
  table.sort(distinct)
  local at = 1
  for i = 1, #distinct do
    local t = distinct[i]
    local c = next_at[t]
    next_at[t] = at
    at = at + c
  end
  local out = {}
  for i = 1, #run do
    local t = times[i]
    local p = next_at[t]
    out[p] = run[i]
    next_at[t] = p + 1
  end
  return out
end

-- The earliest rank of `m`, whose score on `key` is `score`: 1 + the members strictly better
-- + the members of its score before it (one pass over the run, no sort).
local function earliest_rank(key, reach, desc, m, score)
  local better = better_of(key, desc, score)
  local run, times = read_run(key, reach, score)
  if #run == 1 then return better + 1 end
  local mine = nil
  for i = 1, #run do
    if run[i] == m then mine = i break end
  end
  local t, before = times[mine], 0
  for i = 1, #run do
    if times[i] < t or (times[i] == t and i < mine) then before = before + 1 end
  end
  return better + 1 + before
end

-- A function (m, score) -> earliest rank on `key` that reads each run of equal scores once
-- (a lookup of many members of one score).
local function earliest_ranker(key, reach, desc)
  local runs = {}
  return function(m, score)
    local found = runs[score]
    if not found then
      local at = {}
      for i, x in ipairs(earliest_sorted(read_run(key, reach, score))) do at[x] = i end
      found = {count_better(key, desc, score), at}
      runs[score] = found
    end
    return found[1] + found[2][m]
  end
end

-- The members and scores of positions start .. start + n - 1 (0-based) of `key` in the
-- earliest order, given `rows`, Redis's rows of those positions (member, score, ...; REV on
-- a high-first board). Each position's score is the same in both orders: the runs strictly
-- inside the page are sorted as they are, the runs of its first and last score are read
-- whole (they may reach past the page) and the page cut out of them.
local function earliest_page(key, reach, desc, rows, start)
  local n = #rows / 2
  local runs = {} -- each {score, members, times}, in the page's order
  local base = nil -- the 0-based position of the first run's first member
  local i = 1
  while i <= n do
    local score, j = rows[2 * i], i
    while j < n and rows[2 * j + 2] == score do j = j + 1 end
    local run
    if i == 1 or j == n then
      run = cached_run(key, score)
      if i == 1 then base = better_of(key, desc, score) end
      runs[#runs + 1] = {score, run[1], run[2], run}
    else
      local members = {}
      -- Read with REV, a high-first board lists equal scores by member bytes descending.
      if desc then
        for k = j, i, -1 do members[#members + 1] = rows[2 * k - 1] end
      else
        for k = i, j do members[#members + 1] = rows[2 * k - 1] end
      end
      runs[#runs + 1] = {score, members, nil, nil}
    end
    i = j + 1
  end
  -- The reach times the runs lack, in one ZMSCORE for the whole page.
  local need = {}
  for _, r in ipairs(runs) do
    if r[3] == nil and #r[2] > 1 then
      for _, m in ipairs(r[2]) do need[#need + 1] = m end
    end
  end
  local got = #need > 0 and reach_times(reach, need) or {}
  local at = 1
  local seq_m, seq_s = {}, {}
  for _, r in ipairs(runs) do
    local members, times = r[2], r[3]
    if times == nil then
      times = {}
      if #members > 1 then
        for k = 1, #members do times[k] = got[at + k - 1] end
        at = at + #members
      end
      if r[4] then r[4][2] = times end -- the cached run has its times now
    end
    for _, x in ipairs(earliest_sorted(members, times)) do
      seq_m[#seq_m + 1] = x
      seq_s[#seq_s + 1] = r[1]
    end
  end
  local members, scores = {}, {}
  for p = start, start + n - 1 do
    members[#members + 1] = seq_m[p - base + 1]
    scores[#scores + 1] = seq_s[p - base + 1]
  end
  return members, scores
end
