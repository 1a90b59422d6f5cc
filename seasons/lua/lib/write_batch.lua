-- write_batch: the check of write.lua's one argument, the batch (its header describes every
-- field). parse_batch() decodes ARGV[1] and answers the checked batch, or raises
-- '<field>: <what is wrong>', which write.lua answers as the error 'write.lua: ...' having
-- read and written nothing. Apart from the script because it is the protocol's one
-- definition: the rest of write.lua reads the batch only as this returns it (EVENT_FIELDS'
-- column numbers GROUP ... TS name its events' columns).

--! include json
--! include ranks
--! include check
--! include league_join

local PROTOCOL = 9
local EVENT_FIELDS = {'group', 'index', 'member', 'value', 'event_id', 'metadata', 'ts'}
local GROUP, INDEX, MEMBER, VALUE, EVENT_ID, METADATA, TS = 1, 2, 3, 4, 5, 6, 7

local BATCH_FIELDS = set({
  'protocol', 'now', 'aggregate', 'order', 'max_entries', 'dedupe_cutoff', 'events_expire_at',
  'backfill', 'check_only', 'meta_max_fields', 'meta_max_bytes', 'batch_id', 'digest', 'keys',
  'groups', 'event_fields', 'events', 'standing', 'held', 'limits', 'approve', 'twins',
  'league',
})
local HELD_FIELDS = set({'record', 'order', 'done', 'cutoff', 'expire_at'})
local LIMITS_FIELDS = set({'rate', 'gain'})
local RATE_FIELDS = set({'key', 'events', 'expire_at'})
local GAIN_FIELDS = set({'window', 'value'})
local BOARD_KEYS = {
  'state', 'events', 'meta', 'batches', 'batch_results', 'scratch', 'moderation',
}
local GROUP_FIELDS = set({
  'day', 'season', 'key', 'reached', 'distinct', 'expire_at', 'rollups', 'twin', 'league',
})
local ROLLUP_FIELDS = set({
  'window', 'key', 'reached', 'distinct', 'weight', 'expire_at', 'days', 'base',
})
local BASE_FIELDS = set({'key', 'through'})

-- `board`: {trimmed, set}; `day_key`: the day board of the rollup's group.
local function parse_rollup(r, at, board, day_key)
  check(r, 'object', at)
  only(r, ROLLUP_FIELDS, at .. '.')
  local rollup = {
    window = check(r.window, 'string', at .. '.window'),
    key = check_key(r.key, at .. '.key'),
    reached = check_key(r.reached, at .. '.reached', true),
    distinct = check_key(r.distinct, at .. '.distinct', true),
    weight = check(r.weight, 'number', at .. '.weight'),
    expire_at = check(r.expire_at, 'integer', at .. '.expire_at', true),
    days = {},
  }
  -- Only trimmed and set boards read them; when given they must be right all the same.
  if board.trimmed or board.set or r.days ~= nil then
    for j, d in ipairs(check(r.days, 'array', at .. '.days')) do
      local path = at .. '.days[' .. (j - 1) .. ']'
      if not (KINDS.array[2](d) and #d == 3) then
        refuse(path, 'must be [day key, weight, day], got ' .. describe(d))
      end
      local day = check(d[3], 'string', path .. '[2]')
      if not day:find('^%d%d%d%d%-%d%d%-%d%d$') then
        refuse(path .. '[2]', 'must be a day, YYYY-MM-DD, got ' .. describe(day))
      end
      rollup.days[j] = {check_key(d[1], path .. '[0]'), check(d[2], 'number', path .. '[1]'), day}
    end
  end
  if board.set then
    -- The day keys after the group's own: one of them holding the member keeps its value.
    local at_day
    for j = 1, #rollup.days do
      if rollup.days[j][1] == day_key then at_day = j end
    end
    if not at_day then
      refuse(at .. '.days', 'must hold the day key of its group, ' .. json_string(day_key)
        .. ' (a set board writes a value only if no later day has the member)')
    end
    rollup.later = {}
    for j = at_day + 1, #rollup.days do rollup.later[#rollup.later + 1] = rollup.days[j][1] end
  end
  if r.base ~= nil and r.base ~= null then
    local path = at .. '.base'
    check(r.base, 'object', path)
    only(r.base, BASE_FIELDS, path .. '.')
    rollup.base = check_key(r.base.key, path .. '.key')
    rollup.through = check(r.base.through, 'string', path .. '.through')
  end
  -- A trimmed board cuts equal scores by rank, a base keeps no reach times, and a weight of
  -- 0 ties every value: none could keep its reach set exact.
  if rollup.reached and (board.trimmed or rollup.base or rollup.weight <= 0) then
    refuse(at .. '.reached', 'must be null on a board with max_entries > 0, a base or a '
      .. 'weight <= 0')
  end
  if rollup.reached and rollup.distinct then
    refuse(at .. '.distinct', 'must be null when reached is given (one tie rule per board)')
  end
  return rollup
end

local function parse_group(g, at, board, twins, twins_of)
  check(g, 'object', at)
  only(g, GROUP_FIELDS, at .. '.')
  local group = {
    day = check(g.day, 'string', at .. '.day'),
    season = check(g.season, 'string', at .. '.season', true),
    key = check_key(g.key, at .. '.key'),
    reached = check_key(g.reached, at .. '.reached', true),
    distinct = check_key(g.distinct, at .. '.distinct', true),
    expire_at = check(g.expire_at, 'integer', at .. '.expire_at'),
    rollups = {},
  }
  -- The period of the board's league holding the day (null: none, or a twin).
  if board.league and not twins_of then
    group.league = check(g.league, 'object', at .. '.league', true)
    if group.league then
      group.league = parse_league_period(group.league, at .. '.league')
      local seen = board.periods[group.league.period]
      if seen and (seen.joined ~= group.league.joined or seen.cohorts ~= group.league.cohorts
          or seen.open ~= group.league.open or seen.counts ~= group.league.counts
          or seen.start ~= group.league.start
          or seen.join_until ~= group.league.join_until) then
        refuse(at .. '.league', 'differs from the league of another group of period '
          .. json_string(group.league.period))
      end
      -- One table per period: the groups of its days share its joins.
      group.league = seen or group.league
      board.periods[group.league.period] = group.league
    end
  elseif g.league ~= nil and g.league ~= null then
    refuse(at .. '.league', twins_of and 'must be null in a twin' or 'given while league is null')
  end
  if group.reached and group.distinct then
    refuse(at .. '.distinct', 'must be null when reached is given (one tie rule per board)')
  end
  local keys = {[group.key] = true}
  for j, r in ipairs(check(g.rollups, 'array', at .. '.rollups')) do
    local path = at .. '.rollups[' .. (j - 1) .. ']'
    local rollup = parse_rollup(r, path, board, group.key)
    if keys[rollup.key] then
      refuse(path .. '.key', json_string(rollup.key) .. ' is written twice by this group')
    end
    keys[rollup.key] = true
    group.rollups[j] = rollup
  end
  if twins then
    local tw = parse_group(check(g.twin, 'object', at .. '.twin'), at .. '.twin', board, false,
      true)
    if tw.day ~= group.day or tw.season ~= group.season or tw.distinct
        or #tw.rollups ~= #group.rollups then
      refuse(at .. '.twin', 'must name the twins of its group: the same day, season and '
        .. 'rollups, no distinct set')
    end
    for j, r in ipairs(tw.rollups) do
      if r.distinct or r.window ~= group.rollups[j].window then
        refuse(at .. '.twin.rollups[' .. (j - 1) .. ']', 'must be the twin of rollups['
          .. (j - 1) .. '], with no distinct set')
      end
    end
    tw.is_twin = true
    group.twin = tw
  elseif g.twin ~= nil and g.twin ~= null then
    refuse(at .. '.twin', 'given while twins is false')
  end
  return group
end

-- kind and nullable of each column of EVENT_FIELDS, for the message of a bad event.
local EVENT_CHECKS = {
  {'count'}, {'count'}, {'string'}, {'number'}, {'string', true}, {'string', true}, {'number'},
}

-- The events are many: each is tested inline, and only a bad one goes through `check`,
-- which names its field.
local function parse_events(rows, ngroups)
  local type, byte, width = type, string.byte, #EVENT_FIELDS
  for i = 1, #rows do
    local ev = rows[i]
    if type(ev) ~= 'table' or #ev ~= width then
      refuse('events[' .. (i - 1) .. ']', 'must be an array of ' .. width
        .. ' values (event_fields), got ' .. describe(ev))
    end
    -- The columns of EVENT_FIELDS.
    local g, index, member, value, event_id, meta = ev[1], ev[2], ev[3], ev[4], ev[5], ev[6]
    local ts = ev[7]
    if type(g) ~= 'number' or g % 1 ~= 0 or g < 0 or g >= ngroups
        or type(index) ~= 'number' or index % 1 ~= 0 or index < 0
        or type(member) ~= 'string'
        or type(value) ~= 'number' or value ~= value or value == huge or value == -huge
        or type(ts) ~= 'number' or ts ~= ts or ts == huge or ts == -huge
        or (event_id ~= null and type(event_id) ~= 'string')
        or (meta ~= null and (type(meta) ~= 'string'
          or (byte(meta, 1) ~= 61 and byte(meta, 1) ~= 126))) then  -- '=', '~'
      local at = 'events[' .. (i - 1) .. '].'
      for f = 1, width do
        check(ev[f], EVENT_CHECKS[f][1], at .. EVENT_FIELDS[f], EVENT_CHECKS[f][2])
      end
      if g >= ngroups then
        refuse(at .. 'group', describe(g) .. ', but the batch has ' .. ngroups .. ' group(s)')
      end
      refuse(at .. 'metadata', "must begin with '=' or '~', got " .. describe(meta))
    end
  end
end



local STANDING_FIELDS = set({'window', 'ties'})

-- Where the standing of a group's events is read: {board, its reach or distinct set}, or
-- false when the group has no board of `window` (a day outside every season).
local function standing_board(grp, window)
  if window == 'day' then return {grp.key, grp.reached or grp.distinct} end
  for _, r in ipairs(grp.rollups) do
    if r.window == window then return {r.key, r.reached or r.distinct} end
  end
  return false
end

-- The standing board of a group (above) with what a hidden or banned member's self-view reads
-- there (lib/hidden.lua): `twin`, the twin board and its reach set (with `twins`), and `cap`,
-- the size it keeps (day boards are never trimmed).
local function standing_of(grp, window, max_entries)
  local s = standing_board(grp, window)
  if s then
    s.twin = grp.twin and standing_board(grp.twin, window)
    s.cap = window == 'day' and 0 or max_entries
  end
  return s
end

local function parse_batch()
  if #ARGV ~= 1 then refuse('ARGV', 'must be 1 argument (the batch as JSON), got ' .. #ARGV) end
  local ok, batch = pcall(cjson.decode, ARGV[1])
  if not ok then refuse('ARGV[1]', 'not JSON (' .. tostring(batch) .. ')') end
  check(batch, 'object', 'ARGV[1]')
  if batch.protocol ~= PROTOCOL then
    refuse('protocol', 'this script speaks protocol ' .. PROTOCOL .. ', got '
      .. describe(batch.protocol))
  end
  only(batch, BATCH_FIELDS, '')
  local b = {
    now = check(batch.now, 'number', 'now'),
    aggregate = one_of(batch.aggregate, {'sum', 'max', 'min', 'set'}, 'aggregate'),
    desc = one_of(batch.order, {'desc', 'asc'}, 'order') == 'desc',
    max_entries = check(batch.max_entries, 'count', 'max_entries'),
    cutoff = check(batch.dedupe_cutoff, 'number', 'dedupe_cutoff'),
    events_expire_at = check(batch.events_expire_at, 'integer', 'events_expire_at'),
    backfill = check(batch.backfill, 'boolean', 'backfill'),
    check_only = check(batch.check_only, 'boolean', 'check_only'),
    meta_max_fields = check(batch.meta_max_fields, 'count', 'meta_max_fields'),
    meta_max_bytes = check(batch.meta_max_bytes, 'count', 'meta_max_bytes'),
    batch_id = check(batch.batch_id, 'string', 'batch_id'),
    digest = check(batch.digest, 'string', 'digest'),
    keys = {},
    groups = {},
  }
  check(batch.keys, 'object', 'keys')
  only(batch.keys, set(BOARD_KEYS), 'keys.')
  for _, name in ipairs(BOARD_KEYS) do
    b.keys[name] = check_key(batch.keys[name], 'keys.' .. name)
  end
  b.twins = check(batch.twins, 'boolean', 'twins')
  b.league = check(batch.league, 'object', 'league', true)
  if b.league then b.league = parse_league(b.league, 'league') end
  local board = {
    trimmed = b.max_entries > 0, set = b.aggregate == 'set', league = b.league, periods = {},
  }
  local days = {}
  for g, grp in ipairs(check(batch.groups, 'array', 'groups')) do
    local at = 'groups[' .. (g - 1) .. ']'
    b.groups[g] = parse_group(grp, at, board, b.twins)
    local day = b.groups[g].day
    if days[day] then refuse(at .. '.day', json_string(day) .. ' is the day of another group') end
    days[day] = true
  end
  local standing = check(batch.standing, 'object', 'standing', true)
  if standing then
    only(standing, STANDING_FIELDS, 'standing.')
    local window = check(standing.window, 'string', 'standing.window')
    b.ties = one_of(standing.ties, tie_names(), 'standing.ties')
    for g, grp in ipairs(b.groups) do
      grp.standing = standing_of(grp, window, b.max_entries)
      if tie_side(b.ties) == 'reached' and grp.standing and not grp.standing[2] then
        refuse('standing.ties', b.ties .. ' ranks need the reach set of the ' .. window
          .. ' board of groups[' .. (g - 1) .. ']')
      end
    end
  end
  local held = check(batch.held, 'object', 'held', true)
  if held then
    only(held, HELD_FIELDS, 'held.')
    b.held = {
      record = check_key(held.record, 'held.record'),
      order = check_key(held.order, 'held.order'),
      done = check_key(held.done, 'held.done'),
      cutoff = check(held.cutoff, 'number', 'held.cutoff'),
      expire_at = check(held.expire_at, 'integer', 'held.expire_at'),
    }
  end
  local limits = check(batch.limits, 'object', 'limits', true)
  if limits then
    if not b.held then refuse('limits', 'needs held (where held events are kept)') end
    only(limits, LIMITS_FIELDS, 'limits.')
    b.limits = {}
    local rate = check(limits.rate, 'object', 'limits.rate', true)
    if rate then
      only(rate, RATE_FIELDS, 'limits.rate.')
      b.limits.rate = {
        key = check_key(rate.key, 'limits.rate.key'),
        events = check(rate.events, 'count', 'limits.rate.events'),
        expire_at = check(rate.expire_at, 'integer', 'limits.rate.expire_at'),
      }
    end
    local gain = check(limits.gain, 'object', 'limits.gain', true)
    if gain then
      only(gain, GAIN_FIELDS, 'limits.gain.')
      if b.aggregate ~= 'sum' then refuse('limits.gain', 'only on a sum board') end
      b.limits.gain = {
        window = check(gain.window, 'string', 'limits.gain.window'),
        value = check(gain.value, 'number', 'limits.gain.value'),
      }
    end
  end
  b.approve = check(batch.approve, 'string', 'approve', true)
  if b.approve and not b.held then refuse('approve', 'needs held (where the record is)') end
  local names = check(batch.event_fields, 'array', 'event_fields')
  local same = #names == #EVENT_FIELDS
  for i = 1, #EVENT_FIELDS do same = same and names[i] == EVENT_FIELDS[i] end
  if not same then
    local given = {}
    for i = 1, #names do
      given[i] = type(names[i]) == 'string' and names[i] or describe(names[i])
    end
    refuse('event_fields', 'this script reads events as [' .. table.concat(EVENT_FIELDS, ', ')
      .. '], the batch sends [' .. table.concat(given, ', ') .. ']')
  end
  b.events = check(batch.events, 'array', 'events')
  parse_events(b.events, #b.groups)
  if b.approve and not (#b.events == 1 and b.events[1][EVENT_ID] == b.approve) then
    refuse('events', 'must be the one event approved, with the event id ' .. json_string(b.approve))
  end
  return b
end
