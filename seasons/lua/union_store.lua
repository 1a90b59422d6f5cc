-- Recompute a week or season board from its day keys in one atomic step (small boards).
--
-- KEYS[1] target sorted set   KEYS[2..] day sorted sets
-- ARGV[1] aggregate (sum|max|min)  ARGV[2] order (desc|asc)  ARGV[3] max_entries (0 = all)
-- ARGV[4] expireat of the target  ARGV[5..] one weight per day key
-- Returns the target's size afterwards.

local target = KEYS[1]
local n = #KEYS - 1
local args = {target, n}
for i = 2, #KEYS do args[#args + 1] = KEYS[i] end
args[#args + 1] = 'WEIGHTS'
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
args[#args + 1] = 'AGGREGATE'
args[#args + 1] = string.upper(ARGV[1])
local size = redis.call('ZUNIONSTORE', unpack(args))
local max_entries = tonumber(ARGV[3])
if max_entries > 0 and size > max_entries then
  if ARGV[2] == 'desc' then
    redis.call('ZREMRANGEBYRANK', target, 0, -(max_entries + 1))
  else
    redis.call('ZREMRANGEBYRANK', target, max_entries, -1)
  end
  size = max_entries
end
if size > 0 then redis.call('EXPIREAT', target, ARGV[4]) end
return size
