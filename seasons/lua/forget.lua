-- Erase one member from a board: from each given sorted set and from the metadata hash.
--
-- KEYS[1] meta hash   KEYS[2..] sorted sets of the board (live, archived, scratch)
-- ARGV[1] the member
-- Returns {metadata removed (0|1), then 1-based positions in KEYS of the sets it was on}.

local out = {redis.call('HDEL', KEYS[1], ARGV[1])}
for k = 2, #KEYS do
  if redis.call('ZREM', KEYS[k], ARGV[1]) == 1 then out[#out + 1] = k end
end
return out
