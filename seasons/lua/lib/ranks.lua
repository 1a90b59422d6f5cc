-- ranks: dense ranks (ties = "dense": 1, 1, 2), which count distinct scores; earliest ranks
-- (ties = "earliest", below), which order equal scores by the time each was reached.
--
-- A sorted set counts members in a score range in O(log n) (ZCOUNT), but not distinct
-- scores: those are walked. Each ZRANGE BYSCORE starts just past the last score seen, so a
-- run of equal scores is skipped in one jump whatever its length, and reads a chunk of
-- entries whose size adapts: doubling while the entries read are all distinct scores (then
-- the walk reads the entries in bulk), halving while they are mostly equal scores (then it is
-- one jump per distinct score). A dense rank d therefore costs about d jumps of O(log n) on a
-- board of few distinct scores and about d / 1024 of them, reading d entries, on a board of
-- all-distinct scores.

local DENSE_CHUNK_MAX = 1024

-- Walk the distinct scores of `key` from `from` towards `to` (ZRANGE BYSCORE bounds, the
-- better one first: '+inf' .. '-inf' on a desc board). Returns (k, the k-th score) once k
-- distinct scores are seen (`k` nil: never), or (the number seen, nil) at `to`.
local function walk_distinct(key, desc, from, to, k)
  local count, chunk = 0, 16
  while true do
    local rows
    if desc then
      rows = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'REV', 'LIMIT', 0, chunk,
        'WITHSCORES')
    else
      rows = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'LIMIT', 0, chunk, 'WITHSCORES')
    end
    local n = #rows / 2
    if n == 0 then return count, nil end
    -- The first row is a new score (the range starts past the last one seen). Redis writes
    -- a score in one way only (-0 as 0), so equal texts are equal scores.
    local seen, last = 0, nil
    for i = 2, #rows, 2 do
      if rows[i] ~= last then
        seen, last = seen + 1, rows[i]
        if count + seen == k then return k, last end
      end
    end
    count = count + seen
    if n < chunk then return count, nil end
    from = '(' .. last
    if seen == n then
      chunk = math.min(chunk * 2, DENSE_CHUNK_MAX)
    elseif seen * 4 <= n then
      chunk = math.max(math.floor(chunk / 2), 1)
    end
  end
end

-- The number of distinct scores of `key` strictly better than `score` (Redis's text of a
-- score) and within `from`, a ZRANGE BYSCORE bound on the better side: '+inf' (desc) or
-- '-inf' (asc) for the whole board, '(' .. s for the scores worse than s.
local function distinct_before(key, desc, from, score)
  return (walk_distinct(key, desc, from, '(' .. score, nil))
end

-- The dense rank of `score` on `key`: 1 + the distinct scores strictly better.
local function dense_rank(key, desc, score)
  return 1 + distinct_before(key, desc, desc and '+inf' or '-inf', score)
end

-- The k-th distinct score of `key` from the best (Redis's text of it), or nil when the board
-- has fewer distinct scores: the score that gives dense rank k.
local function nth_distinct(key, desc, k)
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

-- The run of `score` on `key` and the reach time of each of its members (none for a run of
-- one, which has no order to find).
local function read_run(key, reach, score)
  local by_key = earliest_runs[key]
  if not by_key then
    by_key = {}
    earliest_runs[key] = by_key
  end
  local found = by_key[score]
  if not found then
    local run = score_run(key, score)
    found = {run, #run > 1 and reach_times(reach, run) or {}}
    by_key[score] = found
  end
  return found[1], found[2]
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
  local better = count_better(key, desc, score)
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
  local seq_m, seq_s = {}, {}
  local base = nil -- the 0-based position of seq_m[1]
  local i = 1
  while i <= n do
    local score, j = rows[2 * i], i
    while j < n and rows[2 * j + 2] == score do j = j + 1 end
    local run, times
    if i == 1 or j == n then
      run, times = read_run(key, reach, score)
      if i == 1 then base = count_better(key, desc, score) end
    else
      run = {}
      -- Read with REV, a high-first board lists equal scores by member bytes descending.
      if desc then
        for k = j, i, -1 do run[#run + 1] = rows[2 * k - 1] end
      else
        for k = i, j do run[#run + 1] = rows[2 * k - 1] end
      end
      times = #run > 1 and reach_times(reach, run) or {}
    end
    for _, x in ipairs(earliest_sorted(run, times)) do
      seq_m[#seq_m + 1] = x
      seq_s[#seq_s + 1] = score
    end
    i = j + 1
  end
  local members, scores = {}, {}
  for p = start, start + n - 1 do
    members[#members + 1] = seq_m[p - base + 1]
    scores[#scores + 1] = seq_s[p - base + 1]
  end
  return members, scores
end
