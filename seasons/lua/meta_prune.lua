-- Remove the metadata of members that are on none of a board's sorted sets.
--
-- KEYS[1] meta hash   KEYS[2..] every live and archived sorted set of the board (and the
--                     keys of periods still taking events, which may not exist yet)
-- ARGV[1..] members to check
-- Returns the members whose metadata was removed. Atomic, so a write that puts a member on a
-- board in the meantime keeps its metadata.

local removed = {}
for i = 1, #ARGV do
  local m = ARGV[i]
  local found = false
  for k = 2, #KEYS do
    if redis.call('ZSCORE', KEYS[k], m) then
      found = true
      break
    end
  end
  if not found and redis.call('HDEL', KEYS[1], m) == 1 then removed[#removed + 1] = m end
end
return removed
