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

-- ties = "earliest": beside a board, its reach set (member -> the time it reached its
-- score). A rolled-up board's reach comes from its days' reach sets (`reached`, one per day
-- of `days`, in the same order): sum: the latest reach of the days that have the member;
-- max (min): the earliest reach of the days whose weighted score is the best; set: the
-- reach of the latest day that has the member. A day's reach set holds the members of its
-- day board; a member a day has without a reach there (written before the board kept reach
-- times) takes none from that day.

-- The reach of `member` from `days` and their reach sets `reached`, or nil.
local function reach_days(aggregate, days, reached, member)
  if aggregate == 'set' then
    for i = #days, 1, -1 do
      if redis.call('ZSCORE', days[i][1], member) then
        local r = redis.call('ZSCORE', reached[i], member)
        if r then return tonumber(r) end
        return nil
      end
    end
    return nil
  end
  local best, out = nil, nil
  for i = 1, #days do
    local s = redis.call('ZSCORE', days[i][1], member)
    if s then
      local r = redis.call('ZSCORE', reached[i], member)
      if r then r = tonumber(r) else r = nil end  -- ZSCORE answers false for none
      if aggregate == 'sum' then
        if r and (out == nil or r > out) then out = r end
      else
        local x = days[i][2] * tonumber(s)
        if best == nil or (aggregate == 'max' and x > best) or (aggregate == 'min' and x < best) then
          best, out = x, r
        elseif x == best and r and (out == nil or r < out) then
          out = r
        end
      end
    end
  end
  return out
end

-- Every member's reach at once: `target_reached` replaced by the reach set of the board
-- `target` (already recomputed from `days`), from the days' reach sets `reached`.
local function reach_store(target_reached, target, days, reached, aggregate, scratch)
  if aggregate == 'sum' then
    -- ZUNIONSTORE's default weights are 1: the reach times as they are, the latest kept.
    local args = {'ZUNIONSTORE', target_reached, #reached}
    for i = 1, #reached do args[#args + 1] = reached[i] end
    args[#args + 1] = 'AGGREGATE'
    args[#args + 1] = 'MAX'
    return redis.call(unpack(args))
  end
  if aggregate == 'set' then
    local plain = {}
    for i = 1, #reached do plain[i] = {reached[i], 1} end
    return aggregate_store(target_reached, plain, 'set', scratch)
  end
  -- max, min: which days tie for the best weighted score is per member.
  redis.call('DEL', target_reached)
  local size = redis.call('ZCARD', target)
  local n = 0
  for from = 0, size - 1, SET_CHUNK do
    local members = redis.call('ZRANGE', target, from, from + SET_CHUNK - 1)
    local args = {}
    for j = 1, #members do
      local r = reach_days(aggregate, days, reached, members[j])
      if r then
        args[#args + 1] = r
        args[#args + 1] = members[j]
      end
    end
    if #args > 0 then
      redis.call('ZADD', target_reached, unpack(args))
      n = n + #args / 2
    end
  end
  return n
end
