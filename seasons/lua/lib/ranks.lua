-- ranks: dense ranks (ties = "dense": 1, 1, 2), which count distinct scores.
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

-- The number of distinct scores of `key` strictly better than `score` (Redis's text of a
-- score) and within `from`, a ZRANGE BYSCORE bound on the better side: '+inf' (desc) or
-- '-inf' (asc) for the whole board, '(' .. s for the scores worse than s.
local function distinct_before(key, desc, from, score)
  local count, chunk, stop = 0, 16, '(' .. score
  while true do
    local rows
    if desc then
      rows = redis.call('ZRANGE', key, from, stop, 'BYSCORE', 'REV', 'LIMIT', 0, chunk,
        'WITHSCORES')
    else
      rows = redis.call('ZRANGE', key, from, stop, 'BYSCORE', 'LIMIT', 0, chunk, 'WITHSCORES')
    end
    local n = #rows / 2
    if n == 0 then return count end
    -- The first row is a new score (the range starts past the last one seen). Redis writes
    -- a score in one way only (-0 as 0), so equal texts are equal scores.
    local seen, last = 1, rows[2]
    for i = 4, #rows, 2 do
      if rows[i] ~= last then seen, last = seen + 1, rows[i] end
    end
    count = count + seen
    if n < chunk then return count end
    from = '(' .. last
    if seen == n then
      chunk = math.min(chunk * 2, DENSE_CHUNK_MAX)
    elseif seen * 4 <= n then
      chunk = math.max(math.floor(chunk / 2), 1)
    end
  end
end

-- The dense rank of `score` on `key`: 1 + the distinct scores strictly better.
local function dense_rank(key, desc, score)
  return 1 + distinct_before(key, desc, desc and '+inf' or '-inf', score)
end

-- The k-th distinct score of `key` from the best (Redis's text of it), or nil when the board
-- has fewer distinct scores: the score that gives dense rank k. Walked like distinct_before.
local function nth_distinct(key, desc, k)
  local count, chunk = 0, 16
  local from, to = desc and '+inf' or '-inf', desc and '-inf' or '+inf'
  while true do
    local rows
    if desc then
      rows = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'REV', 'LIMIT', 0, chunk,
        'WITHSCORES')
    else
      rows = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'LIMIT', 0, chunk, 'WITHSCORES')
    end
    local n = #rows / 2
    if n == 0 then return nil end
    local seen, last = 0, nil
    for i = 2, #rows, 2 do
      if rows[i] ~= last then
        seen, last = seen + 1, rows[i]
        if count + seen == k then return last end
      end
    end
    count = count + seen
    if n < chunk then return nil end
    from = '(' .. last
    if seen == n then
      chunk = math.min(chunk * 2, DENSE_CHUNK_MAX)
    elseif seen * 4 <= n then
      chunk = math.max(math.floor(chunk / 2), 1)
    end
  end
end
