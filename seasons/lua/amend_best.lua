-- Merge one version's results into an amended season's best results (seasons.amend): a
-- member's entry is replaced only by a better tier, in one atomic call, so that concurrent
-- merges (two moderation calls amending at once) never put back a worse one, and a rerun
-- changes nothing.
--
-- KEYS[1] best results hash (member -> JSON {"rank","score","reward","version","tier"};
--         "tier": the index of its reward's tier, lower is better, the count of tiers + 1
--         for none)
-- ARGV[i] (i = 1, 3, 5, ...): a member; ARGV[i + 1]: its row's JSON (with "tier")
-- Returns the number of entries written.

local written = 0
for i = 1, #ARGV, 2 do
  local member, row = ARGV[i], ARGV[i + 1]
  local current = redis.call('HGET', KEYS[1], member)
  if not current or cjson.decode(current)['tier'] > cjson.decode(row)['tier'] then
    redis.call('HSET', KEYS[1], member, row)
    written = written + 1
  end
end
return written
