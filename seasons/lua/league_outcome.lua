-- Write the outcomes of some cohorts of a league period, each cohort once: a cohort whose id
-- is already in the done set is skipped whole, so a chunk sent again after a crash writes
-- nothing twice (jobs/league_close.py).
--
-- KEYS[1] the period's outcome hash   KEYS[2] its done set (cohort ids written)
-- ARGV[1] EXPIREAT of both (epoch seconds; 0: none), then for each cohort: its id, n, and
--         n pairs member, outcome JSON (seasons.leagues.Outcome.to_json)
-- Returns the number of cohorts written by this call.

local written = 0
local i = 2
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    written = written + 1
    if n > 0 then redis.call('HSET', KEYS[1], unpack(ARGV, i + 2, i + 1 + 2 * n)) end
  end
  i = i + 2 + 2 * n
end
local at = tonumber(ARGV[1])
if at > 0 and written > 0 then
  redis.call('EXPIREAT', KEYS[1], at)
  redis.call('EXPIREAT', KEYS[2], at)
end
return written
