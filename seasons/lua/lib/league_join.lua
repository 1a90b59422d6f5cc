-- league_join: members joining league cohorts (docs/leagues.md#joining). The write script
-- joins each member on its first accepted event of a period (join_batch); the close joins
-- the members whose join waited for it (league_waiting.lua). Both place a member with the
-- same joiner, so a cohort fills the same way whoever fills it.
--
-- A league `L` (the batch's `league`): {span, size, tiers, group_by, state, tier}; a
-- period `P` (a group's `league`): {period, previous, start, join_until, expire_at, joined,
-- cohorts, open, counts}. Their keys are those of seasons.keys (Keys.league_state, league_tier,
-- league). The calls read and write only those keys, which the caller declares in KEYS.

--! include json
--! include check
--! include bulk

local LEAGUE_FIELDS = set({'span', 'size', 'tiers', 'group_by', 'state', 'tier'})
local LEAGUE_PERIOD_FIELDS = set({
  'period', 'previous', 'start', 'join_until', 'expire_at', 'joined', 'cohorts', 'open',
  'counts',
})

-- The league `v` (at `path`) checked, with `lowest` (its first tier) and `is_tier` (a set).
local function parse_league(v, path)
  check(v, 'object', path)
  only(v, LEAGUE_FIELDS, path .. '.')
  local L = {
    span = check(v.span, 'count', path .. '.span'),
    size = check(v.size, 'count', path .. '.size'),
    tiers = check(v.tiers, 'array', path .. '.tiers'),
    group_by = check(v.group_by, 'string', path .. '.group_by'),
    state = check_key(v.state, path .. '.state'),
    tier = check_key(v.tier, path .. '.tier'),
    is_tier = {},
  }
  if L.size < 1 or L.size >= L.span then
    refuse(path .. '.size', 'must be from 1 to span - 1, got ' .. describe(L.size))
  end
  if #L.tiers < 1 then refuse(path .. '.tiers', 'must name at least one tier') end
  for j, t in ipairs(L.tiers) do
    L.is_tier[check(t, 'string', path .. '.tiers[' .. (j - 1) .. ']')] = true
  end
  L.lowest = L.tiers[1]
  return L
end

-- A period of the league `v` (at `path`) checked.
local function parse_league_period(v, path)
  check(v, 'object', path)
  only(v, LEAGUE_PERIOD_FIELDS, path .. '.')
  return {
    period = check(v.period, 'string', path .. '.period'),
    previous = check(v.previous, 'string', path .. '.previous', true),
    start = check(v.start, 'number', path .. '.start'),
    join_until = check(v.join_until, 'number', path .. '.join_until'),
    expire_at = check(v.expire_at, 'integer', path .. '.expire_at'),
    joined = check_key(v.joined, path .. '.joined'),
    cohorts = check_key(v.cohorts, path .. '.cohorts'),
    open = check_key(v.open, path .. '.open'),
    counts = check_key(v.counts, path .. '.counts'),
  }
end

-- A member's tier from the tier hash's value (seasons.leagues.current_tier).
local function league_tier(L, stored)
  if stored and L.is_tier[stored] then return stored end
  return L.lowest
end

-- The cohort group of metadata `text` (JSON, or false): the text value of its group_by field,
-- '' when there is none (seasons.leagues.group_of).
local function league_group(L, text)
  if L.group_by == '' or not text or text == '' then return '' end
  local value = cjson.decode(text)[L.group_by]
  return type(value) == 'string' and value or ''
end

-- The joins of one period within one script call. place(member, tier, group) joins now:
-- the open cohort of (tier, group) while it holds fewer than `size`, else a new cohort (id
-- HLEN + 1); wait(member): the member's join waits, as the n-th (score -n). Each open
-- cohort's fill and the cohort count are read once per call and kept here; the places are
-- added with one ZADD by flush(), which also counts the joins and new cohorts of each tier
-- in P.counts (fields members:<tier>, cohorts:<tier>: the league overview's numbers) and
-- gives the keys written their EXPIREAT.
local function league_joiner(L, P)
  local opened = {}  -- JSON [tier, group] -> {cohort id, fill}, or false: none open
  local count  -- cohorts of the period, once read
  local adds, waits = {}, nil
  local new_cohorts = false
  local counted = {}  -- field of P.counts -> joins or cohorts to add
  local self = {}

  function self.place(member, tier, group)
    local pair = '[' .. json_string(tier) .. ',' .. json_string(group) .. ']'
    local c = opened[pair]
    if c == nil then
      c = false
      local id = redis.call('HGET', P.open, pair)
      if id then
        id = tonumber(id)
        c = {id, redis.call('ZCOUNT', P.joined, id * L.span, id * L.span + L.span - 1)}
      end
    end
    if not c or c[2] >= L.size then
      count = (count or redis.call('HLEN', P.cohorts)) + 1
      c = {count, 0}
      redis.call('HSET', P.cohorts, count,
        '{"group":' .. json_string(group) .. ',"tier":' .. json_string(tier) .. '}')
      redis.call('HSET', P.open, pair, count)
      new_cohorts = true
      counted['cohorts:' .. tier] = (counted['cohorts:' .. tier] or 0) + 1
    end
    counted['members:' .. tier] = (counted['members:' .. tier] or 0) + 1
    opened[pair] = c
    local score = c[1] * L.span + c[2]
    c[2] = c[2] + 1
    adds[#adds + 1], adds[#adds + 2] = score, member
    return score
  end

  function self.wait(member)
    waits = (waits or tonumber(redis.call('HGET', L.state, 'waiting:' .. P.period)) or 0) + 1
    adds[#adds + 1], adds[#adds + 2] = -waits, member
    return -waits
  end

  function self.flush()
    if #adds > 0 then
      chunked(adds, 1000, function(...) redis.call('ZADD', P.joined, ...) end)
      redis.call('EXPIREAT', P.joined, P.expire_at)
    end
    if waits then redis.call('HSET', L.state, 'waiting:' .. P.period, waits) end
    if new_cohorts then
      redis.call('EXPIREAT', P.cohorts, P.expire_at)
      redis.call('EXPIREAT', P.open, P.expire_at)
    end
    if next(counted) then
      for field, n in pairs(counted) do redis.call('HINCRBY', P.counts, field, n) end
      redis.call('EXPIREAT', P.counts, P.expire_at)
    end
    adds, waits, new_cohorts, counted = {}, nil, false, {}
  end

  return self
end

-- The joins of a write batch, after its events are applied: each member's first accepted
-- event of a period joins, waits or does not, by the rule of docs/leagues.md#joining, in
-- batch order. `periods`: the batch's league periods (its groups'), each once; `n` events;
-- event(i) answers the i-th one's period P (or nil: none), member and ts when it was
-- accepted (applied: not a duplicate, held or banned), else nil.
-- meta_at(i): the member's metadata as the batch leaves it at the i-th event, as JSON text,
-- or {value} (its group_by field's value), or nil when the batch has not touched it by then
-- (then the stored metadata counts: stored(members) -> member -> JSON or false). Reads the
-- league state once (HMGET), each period's joined once (ZMSCORE of the batch's members),
-- and only for members that join now their tiers (and metadata) once. A batch whose
-- members have all joined (the steady state) costs those two reads and one pass, which
-- reads the events directly: `fast` = {rows (the batch's events), columns = {group, member,
-- ts} (their positions in a row), groups (the batch's groups), skip(i) (true: the i-th
-- event was not accepted)}, what event(i) answers from.
local function join_batch(L, periods, n, event, meta_at, stored, fast)
  if #periods == 0 then return end
  local fields = {'first', 'first_start'}
  for _, P in ipairs(periods) do
    fields[#fields + 1] = 'close:' .. P.period
    fields[#fields + 1] = 'closed:' .. P.period
    if P.previous then fields[#fields + 1] = 'closed:' .. P.previous end
  end
  local st = values_of('HMGET', L.state, fields)
  local first, first_start = st.first, tonumber(st.first_start)
  local open_to = {}  -- period id -> true when it takes joins (not closing, not too early)
  local after_close = {}  -- period id -> its previous period is closed (or it has none)
  local by_id = {}
  for _, P in ipairs(periods) do
    local id = P.period
    by_id[id] = P
    open_to[id] = not (st['close:' .. id] or st['closed:' .. id])
      and not (first and P.start < first_start)
    after_close[id] = not P.previous or st['closed:' .. P.previous]
  end
  -- One pass: the members of accepted events before join_until in a period that takes
  -- joins, each once per period; whether they have a place already is one ZMSCORE each.
  local asked = {}  -- period id -> list of members, and list.seen: member -> true
  local rows, col, skip = fast.rows, fast.columns, fast.skip
  local g_col, m_col, ts_col = col.group, col.member, col.ts
  local groups = fast.groups
  for i = 1, n do
    local row = rows[i]
    local P = not skip(i) and groups[row[g_col] + 1].league
    local m, ts = row[m_col], row[ts_col]
    if P and open_to[P.period] and ts < P.join_until then
      local list = asked[P.period]
      if not list then
        list = {seen = {}}
        asked[P.period] = list
      end
      if not list.seen[m] then
        list.seen[m] = true
        list[#list + 1] = m
      end
    end
  end
  -- Each asked member's place (or false), as ZMSCORE answers them (one reply per 1 000
  -- members); the steady state (all placed already) only counts the misses.
  local replies, missing = {}, 0
  for id, list in pairs(asked) do
    local parts = {}
    for from = 1, #list, 1000 do
      local part = redis.call('ZMSCORE', by_id[id].joined,
        unpack(list, from, math.min(from + 999, #list)))
      for k = 1, #part do
        if not part[k] then missing = missing + 1 end
      end
      parts[#parts + 1] = part
    end
    replies[id] = parts
  end
  if missing == 0 then return end
  local joined = {}  -- period id -> member -> true once it has a place (or waits)
  for id, list in pairs(asked) do
    local has = {}
    for j, part in ipairs(replies[id]) do
      for k = 1, #part do
        if part[k] then has[list[(j - 1) * 1000 + k]] = true end
      end
    end
    joined[id] = has
  end
  -- The decisions, in batch order: {i, P, member, 'now' | 'wait'}; `first` may be set by the
  -- first join of all.
  local plan, now_members, now_set = {}, {}, {}
  for i = 1, n do
    local P, m, ts = event(i)
    local has = P and joined[P.period]
    -- (the league's first join, earlier in this batch, may have begun it after P)
    if has and not has[m] and ts < P.join_until and not (first and P.start < first_start) then
      local how
      if not first then
        first, first_start = P.period, P.start
        redis.call('HSET', L.state, 'first', first, 'first_start', first_start)
        how = 'now'
      elseif P.period == first or after_close[P.period] then
        how = 'now'
      else
        how = 'wait'
      end
      has[m] = true
      plan[#plan + 1] = {i, P, m, how}
      if how == 'now' and not now_set[m] then
        now_set[m] = true
        now_members[#now_members + 1] = m
      end
    end
  end
  if #plan == 0 then return end
  local tiers = #now_members > 0 and fields_of(L.tier, now_members) or {}
  local metas = {}
  if L.group_by ~= '' then
    local missing, listed = {}, {}
    for _, step in ipairs(plan) do
      local m = step[3]
      if step[4] == 'now' and meta_at(step[1]) == nil and not listed[m] then
        listed[m] = true
        missing[#missing + 1] = m
      end
    end
    if #missing > 0 then metas = stored(missing) end
  end
  local joiners = {}
  for _, step in ipairs(plan) do
    local i, P, m, how = step[1], step[2], step[3], step[4]
    local joiner = joiners[P.period]
    if not joiner then
      joiner = league_joiner(L, P)
      joiners[P.period] = joiner
    end
    if how == 'wait' then
      joiner.wait(m)
    else
      local group = ''
      if L.group_by ~= '' then
        local at = meta_at(i)
        if type(at) == 'table' then
          group = type(at[1]) == 'string' and at[1] or ''
        else
          group = league_group(L, at == nil and metas[m] or at)
        end
      end
      joiner.place(m, league_tier(L, tiers[m]), group)
    end
  end
  for _, P in ipairs(periods) do
    if joiners[P.period] then joiners[P.period].flush() end
  end
end
