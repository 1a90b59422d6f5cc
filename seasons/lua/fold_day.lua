-- Fold one closed day into the base of a board's alltime window, exactly once: the check of
-- the day last folded and its record are one atomic step, so a run killed anywhere and run
-- again folds each day once. Days are folded in order. The day's twin (hidden and banned
-- members' entries) is folded into the twin base in the same step, under the same record.
--
-- KEYS[1] the base sorted set (no TTL)   KEYS[2] the day's sorted set
-- KEYS[3] the board's state hash   KEYS[4] scratch key (a set board's union is built through
--         it; deleted after)   KEYS[5] the twin base (no TTL)   KEYS[6] the day's twin
-- ARGV[1] the day, YYYY-MM-DD   ARGV[2] aggregate (sum|max|min|set)
-- ARGV[3] the state field holding the last day folded
-- Returns 1 if the day was folded now, 0 if it (or a later day) was folded already.

--! include aggregate

local base, day, state, scratch = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local through = redis.call('HGET', state, ARGV[3])
-- ISO days compare as text the way they compare as dates.
if through and ARGV[1] <= through then return 0 end
-- The base first: on a set board the day's values replace the base's.
aggregate_store(base, {{base, 1}, {day, 1}}, ARGV[2], scratch)
-- A day without a twin (no member of the board hidden that day) leaves the twin base as it is.
if redis.call('EXISTS', KEYS[6]) == 1 then
  aggregate_store(KEYS[5], {{KEYS[5], 1}, {KEYS[6], 1}}, ARGV[2], scratch)
end
redis.call('HSET', state, ARGV[3], ARGV[1])
return 1
