-- Recompute a week or season board from its day keys in one atomic step (small boards).
--
-- KEYS[1] target sorted set   KEYS[2] scratch key (a set board's union is built through it;
--         deleted after)   KEYS[3..] day sorted sets, in chronological order
-- ARGV[1] aggregate (sum|max|min|set)  ARGV[2] order (desc|asc)  ARGV[3] max_entries (0 = all)
-- ARGV[4] expireat of the target (0: it never expires)  ARGV[5..] one weight per day key
-- Returns the target's size afterwards.

--! include aggregate
--! include trim

local target = KEYS[1]
local days = {}
for i = 3, #KEYS do days[i - 2] = {KEYS[i], ARGV[2 + i]} end
local size = aggregate_store(target, days, ARGV[1], KEYS[2])
local max_entries = tonumber(ARGV[3])
if max_entries > 0 and size > max_entries then
  trim_board(target, ARGV[2] == 'desc', max_entries)
  size = max_entries
end
-- The union stored a new key, without a TTL: one that never expires keeps none.
if size > 0 and tonumber(ARGV[4]) > 0 then redis.call('EXPIREAT', target, ARGV[4]) end
return size
