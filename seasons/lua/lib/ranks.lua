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

-- The members of `key` with a score strictly better than `score`.
local function count_better(key, desc, score)
  if desc then return redis.call('ZCOUNT', key, '(' .. score, '+inf') end
  return redis.call('ZCOUNT', key, '-inf', '(' .. score)
end

-- The earliest functions, made by the first earliest read of a call (earliest()): a script's
-- body runs at every call and each closure it makes costs that call, so reads of the other
-- rules make none of these.
local function make_earliest()
  local EARLIEST_CHUNK = 1000 -- members per ZMSCORE (unpack has a limit)

  -- The members of `key` whose score is `score` (Redis's text of it), in Redis's order of
  -- equal scores: member bytes ascending.
  local function score_run(key, score)
    return redis.call('ZRANGE', key, score, score, 'BYSCORE')
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

  -- The 0-based position `m`, a member not on `key`, would take there with `score` reached
  -- at `t` (math.huge: no reach time): after the members strictly better and those of its
  -- score reached earlier, or at the same time with smaller member bytes (`before(x, m)`:
  -- the bytes of x come first). A hidden member's self-view (lib/hidden.lua).
  local function earliest_insert(key, reach, desc, m, score, t, before)
    local n = better_of(key, desc, score)
    local run = cached_run(key, score)[1]
    if #run == 0 then return n end
    local times = reach_times(reach, run)
    for i = 1, #run do
      local x = times[i]
      if x < t or (x == t and before(run[i], m)) then n = n + 1 end
    end
    return n
  end

  return {rank = earliest_rank, ranker = earliest_ranker, page = earliest_page,
    insert = earliest_insert}
end

local earliest_fns = nil
local function earliest()
  if not earliest_fns then earliest_fns = make_earliest() end
  return earliest_fns
end

-- The tie rules, by the names seasons/ties.py declares (its SPECS: the read scripts' ARGV[2],
-- the write's standing.ties). Each function below answers for the rule `ties`; a rule ranks
-- members of `key` read with `side`, the set it keeps beside the board (a reach set, a
-- distinct set) or nil. Adding a rule means its branch in each and its TieSpec in
-- seasons/ties.py. (Plain functions, not a table of closures: a script's body runs at each
-- call, and every table and closure it builds costs that call.)

-- The names of the rules, in seasons/ties.py's order.
local function tie_names()
  return {'member', 'shared', 'dense', 'earliest'}
end

-- 'reached' or 'distinct': the set the rule keeps beside each board, which the scripts take in
-- KEYS beside it (a rule whose ranks need it reads no rank without it: 'reached'); or nil.
local function tie_side(ties)
  if ties == 'earliest' then return 'reached' end
  if ties == 'dense' then return 'distinct' end
  return nil
end

-- The set to read `key` with: dense reads without a distinct set that is missing (it walks).
local function tie_beside(ties, key, side)
  if ties == 'dense' then return distinct_set(key, side) end
  return side
end

-- The 1-based rank of `m`, whose score on `key` is `score`.
local function tie_rank(ties, key, side, desc, m, score)
  if ties == 'earliest' then return earliest().rank(key, side, desc, m, score) end
  -- Standard competition ranking: 1 + members with a strictly better score.
  if ties == 'shared' then return 1 + count_better(key, desc, score) end
  if ties == 'dense' then return dense_rank(key, side, desc, score) end
  return 1 + redis.call(desc and 'ZREVRANK' or 'ZRANK', key, m)
end

-- The 0-based position of `m` in the rule's order (what a page around it is centred on), or
-- nil when it is not on `key`.
local function tie_position(ties, key, side, desc, m)
  if ties ~= 'earliest' then return redis.call(desc and 'ZREVRANK' or 'ZRANK', key, m) end
  local score = redis.call('ZSCORE', key, m)
  if score then return earliest().rank(key, side, desc, m, score) - 1 end
  return nil
end

-- The rank of the first of `rows` (member, score, ... of positions start.. in Redis's order),
-- which it puts in the rule's order in place.
local function tie_page(ties, key, side, desc, rows, start)
  if ties == 'earliest' then
    -- Positions in the earliest order: the rows reordered.
    local members, scores = earliest().page(key, side, desc, rows, start)
    for i = 1, #members do rows[2 * i - 1], rows[2 * i] = members[i], scores[i] end
  elseif ties == 'shared' then
    return 1 + count_better(key, desc, rows[2])
  elseif ties == 'dense' then
    -- The first row's rank is counted on the distinct set, when there is one.
    return dense_rank(key, distinct_set(key, side), desc, rows[2])
  end
  return start + 1
end

-- A function (m, score) -> rank on `key` that reads what members share once (a score's rank,
-- a run's order); `side` as tie_beside answers it.
local function tie_ranker(ties, key, side, desc)
  if ties == 'earliest' then return earliest().ranker(key, side, desc) end
  if ties == 'member' then
    return function(m) return 1 + redis.call(desc and 'ZREVRANK' or 'ZRANK', key, m) end
  end
  local by_score = {}
  return function(m, score)
    local r = by_score[score]
    if not r then
      r = tie_rank(ties, key, side, desc, m, score)
      by_score[score] = r
    end
    return r
  end
end

-- Sets f[1], the rank of each f = {_, member, score, ...} of `found` (which a dense rule sorts
-- best score first, f[4] breaking ties).
local function tie_ranks(ties, key, side, desc, found)
  if ties ~= 'dense' then
    local rank = tie_ranker(ties, key, side, desc)
    for _, f in ipairs(found) do f[1] = rank(f[2], f[3]) end
    return
  end
  -- Best score first: each rank is the one before + 1 + the distinct scores between the two
  -- (one walk down them all when the board has no distinct set).
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
      rank = rank + 1 + distinct_before(key, side, desc, from, f[3])
      prev, from = s, '(' .. f[3]
    end
    f[1] = rank
  end
end

-- The score a member needs to rank k on `key` of `total` members, or false: none.
local function tie_nth(ties, key, side, desc, k, total)
  -- Dense rank k is reached by tying the k-th distinct score.
  if ties == 'dense' then return nth_distinct(key, side, desc, k) or false end
  -- The others: the score at position k, the same in Redis's order and the earliest one.
  if k > total then return false end
  if desc then return redis.call('ZRANGE', key, k - 1, k - 1, 'REV', 'WITHSCORES')[2] end
  return redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2]
end
