-- Recompute a week or season board from its day keys in one atomic step (small boards).
--
-- KEYS[1] target sorted set   KEYS[2] scratch key (a set board's union is built through it;
--         deleted after)   KEYS[3 .. 2+n] n day sorted sets, in chronological order; then,
--         on a board with ties = "earliest" only: KEYS[3+n] the target's reach set and
--         KEYS[4+n .. 3+2n] the days' reach sets, in the same order (the reach set is
--         recomputed too: seasons/lua/lib/aggregate.lua, reach_store); or, on a board with
--         ties = "dense" only: KEYS[3+n] the target's distinct set, rebuilt from the target
--         (seasons/lua/lib/trim.lua)
-- ARGV[1] aggregate (sum|max|min|set)  ARGV[2] order (desc|asc)  ARGV[3] max_entries (0 = all)
-- ARGV[4] expireat of the target (0: it never expires)  ARGV[5 .. 4+n] one weight per day key
-- Returns the target's size afterwards.

--! include aggregate
--! include trim

local target = KEYS[1]
local n = #ARGV - 4
local days = {}
for i = 1, n do days[i] = {KEYS[2 + i], ARGV[4 + i]} end
if #KEYS ~= 2 + n and #KEYS ~= 3 + n and #KEYS ~= 3 + 2 * n then
  return redis.error_reply('union_store.lua: ' .. n .. ' day keys (one per weight) take '
    .. (2 + n) .. ', ' .. (3 + n) .. ' or ' .. (3 + 2 * n) .. ' KEYS, got ' .. #KEYS)
end
local size = aggregate_store(target, days, ARGV[1], KEYS[2])
local max_entries = tonumber(ARGV[3])
if max_entries > 0 and size > max_entries then
  trim_board(target, ARGV[2] == 'desc', max_entries)
  size = max_entries
end
local reached, dist = KEYS[3 + n], nil
-- (3 + n and 3 + 2n differ but for no days, which the caller never sends)
if #KEYS == 3 + n and n > 0 then reached, dist = nil, KEYS[3 + n] end
if dist then distinct_rebuild(target, dist) end
if reached then
  local reached_days = {}
  for i = 1, n do reached_days[i] = KEYS[3 + n + i] end
  reach_store(reached, target, days, reached_days, ARGV[1], KEYS[2])
end
-- The union stored a new key, without a TTL: one that never expires keeps none.
if size > 0 and tonumber(ARGV[4]) > 0 then
  redis.call('EXPIREAT', target, ARGV[4])
  if reached and redis.call('EXISTS', reached) == 1 then
    redis.call('EXPIREAT', reached, ARGV[4])
  end
  if dist then redis.call('EXPIREAT', dist, ARGV[4]) end
end
return size
