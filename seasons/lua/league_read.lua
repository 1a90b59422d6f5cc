#!lua flags=no-writes
-- A league read of one period, gathered in one call: a member's cohort, a cohort by id, or
-- the overview of the period (members and cohorts per tier and group). The script only
-- gathers; seasons/league_reads.py ranks (seasons.leagues.standings) and writes the model.
--
-- KEYS[1] joined (zset member -> cohort x span + place; negative: waiting)
-- KEYS[2] cohorts (hash id -> JSON {"tier", "group"})   KEYS[3] open (hash JSON [tier, group]
--         -> id being filled)   KEYS[4] outcome (hash member -> Outcome JSON)
-- KEYS[5] the league's state hash ("closed:<P>")   KEYS[6] the tier hash (member -> tier)
-- KEYS[7] the period's board (the league window's key)   KEYS[8] its twin (hidden members)
-- KEYS[9] the board's moderation hash   KEYS[10] the reach set of KEYS[7]
-- KEYS[11] the reach set of KEYS[8] (both read only when ARGV asks for reach times)
-- KEYS[12] counts (hash members:<tier> / cohorts:<tier> -> joins / cohorts of the tier)
-- ARGV[1] one JSON object: {"mode": "member"|"cohort"|"overview", "member": text (member),
--         "cohort": integer (cohort), "span": COHORT_SPAN, "period": P, "reached": bool}
-- Returns, for member and cohort: {'status', 'ok', 'cohort', id, 'info', its JSON,
-- 'members', {...} in join order, 'scores', 'reached', 'moderation', 'outcomes' (one value or
-- nil per member), 'tier', the asked member's stored tier or nil, 'closing', 1 once the
-- period's close has written an outcome (any cohort's), else 0}; or
-- {'status', 'absent'|'waiting'|'unknown'}. For overview: {'status', 'ok', 'counts', flat
-- HGETALL of KEYS[12], 'closed', 0|1}: O(tiers), whatever the number of cohorts.

if #ARGV ~= 1 then error('league_read.lua: ARGV: must be 1 argument, got ' .. #ARGV, 0) end
local ok, a = pcall(cjson.decode, ARGV[1])
if not ok or type(a) ~= 'table' then error('league_read.lua: ARGV[1] is not a JSON object', 0) end
local mode, span, period = a['mode'], a['span'], a['period']
if type(span) ~= 'number' or span < 1 or type(period) ~= 'string' then
  error('league_read.lua: ARGV[1] needs "span" (a number) and "period" (a text)', 0)
end
if mode == 'overview' then
  return {'status', 'ok', 'counts', redis.call('HGETALL', KEYS[12]),
    'closed', redis.call('HEXISTS', KEYS[5], 'closed:' .. period)}
end

local cohort, tier = nil, false
if mode == 'member' then
  if type(a['member']) ~= 'string' then error('league_read.lua: "member" must be a text', 0) end
  local place = redis.call('ZSCORE', KEYS[1], a['member'])
  if not place then return {'status', 'absent'} end
  place = tonumber(place)
  if place < 0 then return {'status', 'waiting'} end
  cohort = math.floor(place / span)
  tier = redis.call('HGET', KEYS[6], a['member'])
elseif mode == 'cohort' then
  if type(a['cohort']) ~= 'number' then error('league_read.lua: "cohort" must be a number', 0) end
  cohort = a['cohort']
else
  error('league_read.lua: unknown mode ' .. tostring(mode), 0)
end
local info = redis.call('HGET', KEYS[2], cohort)
if not info then return {'status', 'unknown'} end
local members = redis.call('ZRANGEBYSCORE', KEYS[1], cohort * span, (cohort + 1) * span - 1)
local scores, reached, moderation, outcomes = {}, {}, {}, {}
if #members > 0 then
  scores = redis.call('ZMSCORE', KEYS[7], unpack(members))
  moderation = redis.call('HMGET', KEYS[9], unpack(members))
  outcomes = redis.call('HMGET', KEYS[4], unpack(members))
  if a['reached'] then reached = redis.call('ZMSCORE', KEYS[10], unpack(members)) end
  -- Hidden and banned members' entries live on the twin keys (docs/fair-play.md).
  for i, m in ipairs(members) do
    if moderation[i] then
      scores[i] = redis.call('ZSCORE', KEYS[8], m)
      if a['reached'] then reached[i] = redis.call('ZSCORE', KEYS[11], m) end
    end
  end
end
return {'status', 'ok', 'cohort', cohort, 'info', info, 'members', members, 'scores', scores,
  'reached', reached, 'moderation', moderation, 'outcomes', outcomes, 'tier', tier,
  'closing', redis.call('EXISTS', KEYS[4])}
