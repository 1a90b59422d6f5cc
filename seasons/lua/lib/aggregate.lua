-- aggregate: a rolled-up board (week, season, ...) holds, for each member, the aggregate
-- (sum, max or min) of weight x score over the day boards it is on; for `set`, weight x score
-- of the LATEST of those days (a later day's value replaces an earlier one's). `days` is a
-- list of {day key, weight} in chronological order (set reads that order).

-- Two contributions combined the board's way (sum, max, min: set has no such rule, its
-- result depends on which day each value came from).
local function aggregate_pair(aggregate, x, y)
  if aggregate == 'sum' then return x + y end
  if aggregate == 'max' then return math.max(x, y) end
  return math.min(x, y)
end

-- The score of `member` from `days`, or nil when it is on none of them.
local function aggregate_days(aggregate, days, member)
  if aggregate == 'set' then
    for i = #days, 1, -1 do
      local s = redis.call('ZSCORE', days[i][1], member)
      if s then return days[i][2] * tonumber(s) end
    end
    return nil
  end
  local total = nil
  for i = 1, #days do
    local s = redis.call('ZSCORE', days[i][1], member)
    if s then
      local x = days[i][2] * tonumber(s)
      if total == nil then total = x else total = aggregate_pair(aggregate, total, x) end
    end
  end
  return total
end

-- Every member's score at once: `target` replaced by the union of `days` (ZUNIONSTORE with
-- their weights). Returns the size of `target`. `target` may be the first of `days` (a base
-- that the next days are folded into), no other.
-- ZUNIONSTORE has no "latest" aggregate. For set the days are read from the latest back:
-- `target` starts as the latest day, weighted; each earlier day adds only its members that no
-- later day has (ZDIFFSTORE into `scratch`, a key of the same slot, deleted after), so each
-- member is written once, and the work grows with the days' sizes, not with days x board.
-- When `target` is the first day, each later day's members are written over it instead.
local SET_CHUNK = 500

-- Every member of `source`, weight x its score, added to (or replacing its score on) `target`.
local function zadd_weighted(target, source, weight, size)
  for from = 0, size - 1, SET_CHUNK do
    local rows = redis.call('ZRANGE', source, from, from + SET_CHUNK - 1, 'WITHSCORES')
    local args = {}
    for j = 1, #rows, 2 do
      args[j] = weight * tonumber(rows[j + 1])
      args[j + 1] = rows[j]
    end
    redis.call('ZADD', target, unpack(args))
  end
end

local function aggregate_store(target, days, aggregate, scratch)
  if aggregate == 'set' then
    local present = {}
    for i = 1, #days do
      if redis.call('EXISTS', days[i][1]) == 1 then present[#present + 1] = days[i] end
    end
    local n = #present
    if n == 0 then
      redis.call('DEL', target)
      return 0
    end
    if present[1][1] == target then
      if tonumber(present[1][2]) ~= 1 then
        redis.call('ZUNIONSTORE', target, 1, target, 'WEIGHTS', present[1][2])
      end
      for i = 2, n do
        local day = present[i][1]
        zadd_weighted(target, day, tonumber(present[i][2]), redis.call('ZCARD', day))
      end
      return redis.call('ZCARD', target)
    end
    local size = redis.call('ZUNIONSTORE', target, 1, present[n][1], 'WEIGHTS', present[n][2])
    for i = n - 1, 1, -1 do
      local left = redis.call('ZDIFFSTORE', scratch, 2, present[i][1], target)
      zadd_weighted(target, scratch, tonumber(present[i][2]), left)
      size = size + left
    end
    redis.call('DEL', scratch)
    return size
  end
  local args = {'ZUNIONSTORE', target, #days}
  for i = 1, #days do args[#args + 1] = days[i][1] end
  args[#args + 1] = 'WEIGHTS'
  for i = 1, #days do args[#args + 1] = days[i][2] end
  args[#args + 1] = 'AGGREGATE'
  args[#args + 1] = aggregate
  return redis.call(unpack(args))
end
