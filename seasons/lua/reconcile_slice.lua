-- Repair one slice of members of a week or season board: each given member gets exactly the
-- score the formula gives from the day keys, or leaves the board if it is on no day.
-- Atomic per slice, so a concurrent write-through is never lost or counted twice.
--
-- KEYS[1] target sorted set   KEYS[2..] day sorted sets, in chronological order (a set
--         board's member takes its score from the latest day that has it)
-- ARGV[1] aggregate (sum|max|min|set)  ARGV[2] order (desc|asc)
-- ARGV[3] max_entries to trim to after the slice (0 = do not trim: while the board's own
--         members are still being settled, a stale score must not push out a right one)
-- ARGV[4] expireat of the target (0: it never expires)  ARGV[5] number of day keys n
-- ARGV[6 .. 5+n] one weight per day key; ARGV[6+n ..] members
-- On a board with ties = "earliest" only: KEYS[2+n] the target's reach set and
-- KEYS[3+n .. 2+2n] the days' reach sets, in the same order: each member's reach is set
-- too (seasons/lua/lib/aggregate.lua, reach_days), or removed with it.
-- On a board with ties = "dense" only: KEYS[2+n] the target's distinct set, kept as the
-- write path keeps it (lib/trim.lua): each member's score is added to it (changed or not),
-- an old score no member has any more leaves it; a missing one is first built from the target.
-- Returns the number of members whose entry (score or reach) changed.
--
-- ARGV[1] 'prune' (the end of a sliced repair of a dense board, an erasure): KEYS[1] a
-- board, KEYS[2] its distinct set, ARGV[2..] scores (any text of each: its distinct set's
-- member is found by its score): each that no member of the board has leaves the distinct
-- set. Returns how many did.

--! include aggregate
--! include trim

if ARGV[1] == 'prune' then
  local removed = 0
  for i = 2, #ARGV do
    local s = ARGV[i]
    if redis.call('ZCOUNT', KEYS[1], s, s) == 0 then
      removed = removed + redis.call('ZREMRANGEBYSCORE', KEYS[2], s, s)
    end
  end
  return removed
end

local target = KEYS[1]
local aggregate = ARGV[1]
local desc = ARGV[2] == 'desc'
local max_entries = tonumber(ARGV[3])
local n = tonumber(ARGV[5])
local days = {}
for i = 1, n do days[i] = {KEYS[1 + i], tonumber(ARGV[5 + i])} end
if #KEYS ~= 1 + n and #KEYS ~= 2 + n and #KEYS ~= 2 + 2 * n then
  return redis.error_reply('reconcile_slice.lua: ' .. n .. ' day keys take ' .. (1 + n)
    .. ', ' .. (2 + n) .. ' or ' .. (2 + 2 * n) .. ' KEYS, got ' .. #KEYS)
end
local reached, dist = KEYS[2 + n], nil
-- (2 + n and 2 + 2n differ but for no days, which the caller never sends)
if #KEYS == 2 + n and n > 0 then reached, dist = nil, KEYS[2 + n] end
if dist and redis.call('EXISTS', dist) == 0 and redis.call('ZCARD', target) > 0 then
  distinct_rebuild(target, dist)  -- a board written before distinct sets existed
end
local reached_days = {}
if reached then
  for i = 1, n do reached_days[i] = KEYS[2 + n + i] end
end

-- The member's reach as the days give it (nil: none), set on the reach set; 1 if changed.
local function settle_reach(m, on_board)
  if not reached then return 0 end
  local want = on_board and reach_days(aggregate, days, reached_days, m) or nil
  local have = redis.call('ZSCORE', reached, m)
  if want == nil then
    if have then
      redis.call('ZREM', reached, m)
      return 1
    end
    return 0
  end
  if have == nil or tonumber(have) ~= want then
    redis.call('ZADD', reached, want, m)
    return 1
  end
  return 0
end

-- On a trimmed board a newcomer enters only if it beats the worst member kept.
local function admits(score)
  if max_entries == 0 or redis.call('ZCARD', target) < max_entries then return true end
  local worst
  if desc then
    worst = redis.call('ZRANGE', target, 0, 0, 'WITHSCORES')
    return score > tonumber(worst[2])
  end
  worst = redis.call('ZRANGE', target, -1, -1, 'WITHSCORES')
  return score < tonumber(worst[2])
end

local changed = 0
for i = 6 + n, #ARGV do
  local m = ARGV[i]
  local want = aggregate_days(aggregate, days, m)
  local have = redis.call('ZSCORE', target, m)
  local moved = settle_reach(m, want ~= nil) > 0
  if want == nil then
    if have then
      redis.call('ZREM', target, m)
      moved = true
    end
  elseif have == nil then
    if admits(want) then
      redis.call('ZADD', target, want, m)
      moved = true
    end
  elseif tonumber(have) ~= want then
    redis.call('ZADD', target, want, m)
    moved = true
  end
  if moved then changed = changed + 1 end
  if dist then distinct_settle(target, dist, m, have) end
end
if max_entries > 0 and redis.call('ZCARD', target) > max_entries then
  trim_board(target, desc, max_entries, dist)
end
if changed > 0 and tonumber(ARGV[4]) > 0 and redis.call('TTL', target) == -1 then
  redis.call('EXPIREAT', target, ARGV[4])
end
if dist and tonumber(ARGV[4]) > 0 and redis.call('TTL', dist) == -1 then
  redis.call('EXPIREAT', dist, ARGV[4])
end
if reached and tonumber(ARGV[4]) > 0 and redis.call('TTL', reached) == -1 then
  redis.call('EXPIREAT', reached, ARGV[4])
end
return changed
