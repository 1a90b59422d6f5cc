-- aggregate: a rolled-up board (week, season, ...) holds, for each member, the aggregate
-- (sum, max or min) of weight x score over the day boards it is on. `days` is a list of
-- {day key, weight}.

-- Two contributions combined the board's way.
local function aggregate_pair(aggregate, x, y)
  if aggregate == 'sum' then return x + y end
  if aggregate == 'max' then return math.max(x, y) end
  return math.min(x, y)
end

-- The score of `member` from `days`, or nil when it is on none of them.
local function aggregate_days(aggregate, days, member)
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
-- their weights). Returns the size of `target`.
local function aggregate_store(target, days, aggregate)
  local args = {'ZUNIONSTORE', target, #days}
  for i = 1, #days do args[#args + 1] = days[i][1] end
  args[#args + 1] = 'WEIGHTS'
  for i = 1, #days do args[#args + 1] = days[i][2] end
  args[#args + 1] = 'AGGREGATE'
  args[#args + 1] = aggregate
  return redis.call(unpack(args))
end
