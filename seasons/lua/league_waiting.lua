-- Join the members whose join waited for period P's close, in period P+1 (docs/leagues.md
-- #joining): the n-th to wait (joined score -n) joins before the (n+1)-th, to a cohort of
-- the tier the tier hash holds now and of the group of its metadata now, at most `limit`
-- per call. The call that finds none left sets `closed:<P>` in the league's state (from
-- then on events of P+1 join at once) and drops P+1's waiting counter. Run once P's outcome
-- and the tiers are written (seasons.league_joins.join_waiting loops over it); a call after
-- P is closed does nothing, so a run cut short is simply run again.
--
-- KEYS: the league's state hash, its tier hash, the board's metadata hash, and P+1's
--       joined, cohorts, open and counts keys (seasons.keys: Keys.league_state, league_tier,
--       meta, league); one slot: the board's hash tag.
-- ARGV[1]: JSON {span, size, tiers, group_by, state, tier, meta, period, next, closed,
--       limit}: the league as write.lua's batch `league` gives it (span, size, tiers,
--       group_by, state, tier), the metadata hash, P's id, P+1 as a group's `league` in
--       write.lua ({period, previous, start, join_until, expire_at, joined, cohorts, open,
--       counts}),
--       the value `closed:<P>` is set to (the JSON counts of P's outcome), and how many to
--       join in this call (>= 1).
-- Returns how many members of P+1 still wait after the call (0: P is closed).

--! include json
--! include check
--! include bulk
--! include league_join

local FIELDS = set({
  'span', 'size', 'tiers', 'group_by', 'state', 'tier', 'meta', 'period', 'next', 'closed',
  'limit',
})

local function parse()
  if #ARGV ~= 1 then refuse('ARGV', 'must be 1 argument (JSON), got ' .. #ARGV) end
  local ok, a = pcall(cjson.decode, ARGV[1])
  if not ok then refuse('ARGV[1]', 'not JSON (' .. tostring(a) .. ')') end
  check(a, 'object', 'ARGV[1]')
  only(a, FIELDS, '')
  local league = {}
  for name in pairs(LEAGUE_FIELDS) do league[name] = a[name] end
  local out = {
    league = parse_league(league, 'league'),
    meta = check_key(a.meta, 'meta'),
    period = check(a.period, 'string', 'period'),
    next = parse_league_period(a.next, 'next'),
    closed = check(a.closed, 'string', 'closed'),
    limit = check(a.limit, 'count', 'limit'),
  }
  if out.limit < 1 then refuse('limit', 'must be >= 1, got ' .. describe(out.limit)) end
  if out.next.previous ~= out.period then
    refuse('next.previous', 'must be period ' .. json_string(out.period) .. ', got '
      .. describe(out.next.previous))
  end
  return out
end

local ok, a = pcall(parse)
if not ok then return redis.error_reply('league_waiting.lua: ' .. tostring(a)) end
local L, P = a.league, a.next

if redis.call('HEXISTS', L.state, 'closed:' .. a.period) == 1 then return 0 end
-- -1 first, then -2, ...: arrival order.
local members = redis.call('ZREVRANGEBYSCORE', P.joined, '(0', '-inf', 'LIMIT', 0, a.limit)
if #members > 0 then
  local tiers = fields_of(L.tier, members)
  local metas = L.group_by ~= '' and fields_of(a.meta, members) or {}
  local joiner = league_joiner(L, P)
  for _, m in ipairs(members) do
    joiner.place(m, league_tier(L, tiers[m]), league_group(L, metas[m] or false))
  end
  joiner.flush()
end
local left = redis.call('ZCOUNT', P.joined, '-inf', '(0')
if left == 0 then
  redis.call('HSET', L.state, 'closed:' .. a.period, a.closed)
  redis.call('HDEL', L.state, 'waiting:' .. P.period)
end
return left
