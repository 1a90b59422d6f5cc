-- Apply one validated batch of events to ONE board, atomically (docs/contract.md#writes).
--
-- KEYS: every key the script touches, in any order: the board's keys below, each group's
--       day key and rollup keys, the day keys of the rollups' `days` and their bases. On a
--       cluster they share the board's hash tag, hence one slot. The batch names keys by
--       their names, and each must be one of KEYS.
-- ARGV[1]: the batch, one JSON object (seasons/write_script.py::script_args builds it):
--   protocol          PROTOCOL below
--   now               epoch seconds
--   aggregate, order  'sum' | 'max' | 'min' | 'set', 'desc' | 'asc'
--   max_entries       0, or the size trimmed boards keep
--   dedupe_cutoff     epoch seconds: event and batch ids recorded before it are forgotten
--   events_expire_at  EXPIREAT of the event and batch id keys
--   backfill          true: write days that are closed (not seasons)
--   check_only        true: check every event, write nothing
--   meta_max_fields, meta_max_bytes   limits of a member's metadata after merging
--   batch_id, digest  the batch's id and a digest of its content
--   keys              the board's keys: {state, events, meta, batches, batch_results,
--                     scratch, moderation} (scratch: where a set board's rebuild builds its
--                     union; moderation: the hash member -> JSON of its state, hidden or
--                     banned, docs/fair-play.md)
--   twins             true: each group carries `twin` (below); false: none does
--   groups            one per local day of the batch, each
--                       {day, season, key, reached, distinct, expire_at, rollups, twin?}: its day
--                       id, its season id (or null; the season's state is checked by it), its
--                       day board, that board's reach set (as `reached` below), its distinct
--                       set (as `distinct` below), that board's EXPIREAT, and the boards it
--                       writes through to, each
--                       {window, key, reached, distinct, weight, expire_at, days, base?};
--                       `window` only names it, every rollup is written alike:
--                       reached     the board's reach set (ties = "earliest"), or null
--                                   when the board keeps none: member -> the ts at which
--                                   it reached its score there, written with the board
--                                   and given the board's EXPIREAT. Day board: sum: the
--                                   ts of an event that changes the member's score, if
--                                   later than its reach (max); max (min): a strictly
--                                   better value sets the ts, an equal one keeps the
--                                   earlier of the two; set: every event sets its ts.
--                                   Rollup, weight x value against its old score: sum:
--                                   the day score changed -> the later of the two; max
--                                   (min): better -> ts, equal -> the earlier; set: ts
--                                   when no later day has the member. A member new to a
--                                   board: its ts. Refused with max_entries > 0, a base
--                                   or a weight <= 0 (none could keep it exact).
--                       distinct    the board's distinct set (ties = "dense"), or null:
--                                   one member per distinct score of the board, Redis's
--                                   text of the score scored by it (lib/trim.lua). After
--                                   each change of a member's score its new score is
--                                   added, its old one removed when no member has it any
--                                   more; a trim drops the scores beyond the worst kept, a
--                                   rebuild of a trimmed board rebuilds it, and one missing
--                                   beside a non-empty board (written before distinct sets
--                                   existed) is built from the board first. Given the
--                                   board's EXPIREAT. Refused together with `reached`.
--                       expire_at   its EXPIREAT, or null: the key never expires
--                       days        [[day key, weight, day], ...], the period's days in
--                                   chronological order up to the horizon; required when
--                                   max_entries > 0 (a member new to a trimmed board gets
--                                   its score from them) or aggregate is 'set' (then it
--                                   holds the group's day key: the event's weight x value
--                                   is written only if no later day of `days` has the
--                                   member, else that later day's value stands)
--                       base        optional, null or {key, through}: the window keeps a
--                                   base sorted set `key` (no TTL) holding every day up to
--                                   the ISO day stored in `state` under field `through`; an
--                                   event of a day up to that one is also applied to the
--                                   base (weight x value, the board's aggregate), and on a
--                                   set board it is rejected (day_folded). The board is the
--                                   base then the days of `days` after that day (by their
--                                   `day`, YYYY-MM-DD): what a trimmed board recomputes
--                                   from; `days` lists no base
--   event_fields      the names of the columns of `events`: EVENT_FIELDS below
--   events            the events in batch order, one array each: group (its 0-based
--                     position in `groups`), index in the batch, member, value, event_id
--                     (or null), metadata: null, '=' .. JSON (no nulls: stored as given
--                     when the member has no metadata yet) or '~' .. JSON (has nulls:
--                     always merged), ts: the event's time, epoch seconds (what reach sets
--                     record)
--   held              null, or the board's held-event keys and their upkeep (given when the
--                     board has limits, or with `approve`): {record, order, done, cutoff,
--                     expire_at}: record, hash event id -> JSON of the held event (its
--                     "state": held, approved or rejected); order, sorted set event id ->
--                     arrival of the events still held; done, sorted set event id -> when it
--                     was approved or rejected; cutoff: held events that arrived before it
--                     are dropped (retention); expire_at: EXPIREAT of the three keys. An event
--                     id in `record` counts as seen (a duplicate). docs/writes.md#held-events
--   limits            null, or {rate, gain}, checked in batch order on events that are not
--                     duplicates, unless `backfill`: rate null or {key, events, expire_at}: the
--                     counter hash (member -> accepted events) of the interval holding `now`
--                     and its EXPIREAT; an event of a member with `events` accepted already is
--                     held (member_rate). gain null or {window, value}: an event whose weight x
--                     value is > 0 and would take the member's score on its group's board of
--                     `window` above `value` is held (max_period_gain; sum boards only). A held
--                     event is applied nowhere, its id is recorded as seen and it is stored
--                     in held.record and held.order. Needs `held`.
--   approve           null, or the event id of a held record this call applies: the batch is
--                     that one event (with that id); it is applied whatever the limits and the
--                     seen ids, and its record marked approved, if it is still held
--   standing          null, or {window, ties}: answer where each event's member stands
--                     after the batch (also on a resend of an applied batch, read then) on
--                     its group's board of `window` ('day' or a rollup's window), ranked
--                     by `ties` ('member', 'shared', 'dense' or 'earliest', lib/ranks.lua);
--                     a hidden or banned member's is its self-view (lib/hidden.lua), read
--                     on the twin of that board
--                     twin (with `twins`): the group the events of a hidden member are
--                     applied to, the same fields naming the twin keys (seasons.keys:
--                     Keys.hidden): its day twin, reach twin, rollup twins (their reach twins,
--                     days' twins, base twins), distinct null; never trimmed.
-- Moderation: when the `moderation` hash exists, the batch's members are looked up in it,
-- before the limits (which measure a hidden member's score on the twins). Of the events that
-- are neither duplicates nor held, a banned member's is acknowledged, its id recorded as
-- seen, and applied nowhere (counted as banned); a hidden member's is applied to its group's
-- twin, never to a public key or a distinct set. A batch with a hidden member (with
-- `standing`: a hidden or banned one) and without `twins` answers {'twins'} having written
-- nothing (the caller resends it with them).
-- The whole batch is checked before anything is read or written: one that does not match
-- this description is refused with the error 'write.lua: <field>: <what is wrong>'.
-- Events are checked and applied in batch order, whatever their day, so that duplicates
-- within a batch and metadata merges behave as if submitted one by one.
-- A batch id applied on this board since dedupe_cutoff answers its recorded result at once
-- (in check-only mode too) and writes nothing new; with another digest it is refused.
-- Returns {'applied', applied, duplicates, held, banned, then index, event id, reason of each
-- held event} (with `standing`: then rank, score of each event in batch order, rank an integer
-- and score Redis's text of it, both nil when the member is not on that board or the group
-- has no board of that window, then the 1-based number of each event whose standing is the
-- self-view of a member in open mode), {'twins'} (above), {'rejected', then index, field, code,
-- message of each problem}, {'reused', message} (the batch id came with other events) or,
-- with `approve`, {'not_held', state or nil} (the record is decided already, or gone); on the last three
-- nothing was written.

--! include json
--! include aggregate
--! include trim
--! include ranks
--! include hidden

local PROTOCOL = 7
local EVENT_FIELDS = {'group', 'index', 'member', 'value', 'event_id', 'metadata', 'ts'}
local GROUP, INDEX, MEMBER, VALUE, EVENT_ID, METADATA, TS = 1, 2, 3, 4, 5, 6, 7

-- Checking the batch: each check raises '<field>: <problem>', which a pcall turns into the
-- error reply.

local null = cjson.null
local huge = math.huge
local declared = {}
for i = 1, #KEYS do declared[KEYS[i]] = true end

local function refuse(path, problem)
  error(path .. ': ' .. problem, 0)
end

local function describe(v)
  if v == nil then return 'nothing' end
  if v == null then return 'null' end
  if type(v) == 'string' then return 'the string ' .. json_string(v) end
  if type(v) == 'number' then return 'the number ' .. (json_number(v) or tostring(v)) end
  if type(v) == 'table' then return v[1] == nil and next(v) ~= nil and 'an object' or 'an array' end
  return 'a ' .. type(v)
end

local function finite(v)
  return type(v) == 'number' and v == v and v > -huge and v < huge
end

-- kind -> {what it is called, test}
local KINDS = {
  string = {'a string', function(v) return type(v) == 'string' end},
  number = {'a number', finite},
  integer = {'an integer', function(v) return finite(v) and v % 1 == 0 end},
  count = {'an integer >= 0', function(v) return finite(v) and v % 1 == 0 and v >= 0 end},
  boolean = {'true or false', function(v) return type(v) == 'boolean' end},
  -- cjson decodes arrays and objects alike, as tables: an array has no key but 1..n.
  array = {'an array', function(v)
    return type(v) == 'table' and (next(v) == nil or v[1] ~= nil)
  end},
  object = {'an object', function(v) return type(v) == 'table' and v[1] == nil end},
}

-- `v`, the value at `path`, which must be of `kind` (or null when `nullable`: then nil).
local function check(v, kind, path, nullable)
  if nullable and v == null then return nil end
  local k = KINDS[kind]
  if not k[2](v) then
    refuse(path, 'must be ' .. k[1] .. (nullable and ' or null' or '') .. ', got ' .. describe(v))
  end
  return v
end

local function check_key(v, path, nullable)
  if nullable and v == null then return nil end
  check(v, 'string', path, nullable)
  if not declared[v] then refuse(path, json_string(v) .. ' is not declared in KEYS') end
  return v
end

local function set(list)
  local out = {}
  for _, name in ipairs(list) do out[name] = true end
  return out
end

-- The fields of an object: `known` (a set) and no other.
local function only(obj, known, path)
  for name in pairs(obj) do
    if not known[name] then refuse(path .. tostring(name), 'unknown field') end
  end
end

local BATCH_FIELDS = set({
  'protocol', 'now', 'aggregate', 'order', 'max_entries', 'dedupe_cutoff', 'events_expire_at',
  'backfill', 'check_only', 'meta_max_fields', 'meta_max_bytes', 'batch_id', 'digest', 'keys',
  'groups', 'event_fields', 'events', 'standing', 'held', 'limits', 'approve', 'twins',
})
local HELD_FIELDS = set({'record', 'order', 'done', 'cutoff', 'expire_at'})
local LIMITS_FIELDS = set({'rate', 'gain'})
local RATE_FIELDS = set({'key', 'events', 'expire_at'})
local GAIN_FIELDS = set({'window', 'value'})
local BOARD_KEYS = {
  'state', 'events', 'meta', 'batches', 'batch_results', 'scratch', 'moderation',
}
local GROUP_FIELDS = set({
  'day', 'season', 'key', 'reached', 'distinct', 'expire_at', 'rollups', 'twin',
})
local ROLLUP_FIELDS = set({
  'window', 'key', 'reached', 'distinct', 'weight', 'expire_at', 'days', 'base',
})
local BASE_FIELDS = set({'key', 'through'})

local function one_of(v, choices, path)
  check(v, 'string', path)
  for _, c in ipairs(choices) do if v == c then return v end end
  refuse(path, 'must be ' .. table.concat(choices, ' or ') .. ', got ' .. describe(v))
end

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

local function parse_group(g, at, board, twins)
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
    local tw = parse_group(check(g.twin, 'object', at .. '.twin'), at .. '.twin', board, false)
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

local function parse()
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
  local board = {trimmed = b.max_entries > 0, set = b.aggregate == 'set'}
  b.twins = check(batch.twins, 'boolean', 'twins')
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

local ok, batch = pcall(parse)
if not ok then return redis.error_reply('write.lua: ' .. tostring(batch)) end

local now, aggregate, desc = batch.now, batch.aggregate, batch.desc
local max_entries, cutoff = batch.max_entries, batch.cutoff
local backfill, check_only = batch.backfill, batch.check_only
local state, events, meta = batch.keys.state, batch.keys.events, batch.keys.meta
local moderation = batch.keys.moderation
local batches, batch_results = batch.keys.batches, batch.keys.batch_results
local batch_id, digest, scratch = batch.batch_id, batch.digest, batch.keys.scratch
local groups, all = batch.groups, batch.events
local n = #all
local held, limits, approve = batch.held, batch.limits, batch.approve

-- The event id and the metadata of the i-th event, or false.
local function event_id_of(i)
  local id = all[i][EVENT_ID]
  return id ~= null and id
end
local function metadata_of(i)
  local meta = all[i][METADATA]
  return meta ~= null and meta
end

-- `fn(...)` with each run of at most `size` items of `list` as its arguments (unpack has
-- a limit), for a command that takes many at once.
local function chunked(list, size, fn)
  for from = 1, #list, size do fn(unpack(list, from, math.min(from + size - 1, #list))) end
end

-- What `command` (ZMSCORE, HMGET) answers for each of `names` on `key`, one call per 1000
-- (unpack has a limit): name -> the value, or false (none).
local function values_of(command, key, names)
  local out = {}
  for from = 1, #names, 1000 do
    local upto = math.min(from + 999, #names)
    local got = redis.call(command, key, unpack(names, from, upto))
    for i = from, upto do out[names[i]] = got[i - from + 1] or false end
  end
  return out
end

-- Each of `names`' field of the hash `key`: name -> its value, or false. Redis keeps a hash
-- of at most hash-max-listpack-entries fields (128 by default) as one list, which HMGET scans
-- once per field asked: from a few dozen names on, reading such a hash whole (HGETALL) costs
-- Redis less (bench/moderation.py's writes measure it on a moderation hash of 100 members).
local SMALL_HASH, MANY_NAMES = 128, 32
local function fields_of(key, names)
  if #names < MANY_NAMES then return values_of('HMGET', key, names) end
  local size = redis.call('HLEN', key)
  if size > SMALL_HASH then return values_of('HMGET', key, names) end
  local all, out = {}, {}
  if size > 0 then
    local flat = redis.call('HGETALL', key)
    for i = 1, #flat, 2 do all[flat[i]] = flat[i + 1] end
  end
  for _, name in ipairs(names) do out[name] = all[name] or false end
  return out
end

-- Each of `members`' score on `key`: member -> Redis's text of it, or false (not there).
local function scores_of(key, members)
  return values_of('ZMSCORE', key, members)
end

-- With `standing`: where each event's member stands now on its group's board of that
-- window, as {rank, score, ...} in batch order (false, false: not there), then the 1-based
-- events whose standing is an open self-view. Each board is read once per member: one
-- ZMSCORE of its members, then the rank of each by the board's tie rule (lib/ranks.lua),
-- once per score where the rule ranks by score alone. A member missing from its board may be
-- hidden or banned: the members missing anywhere have their moderation fields read (one
-- HMGET; none when every member is found), and such a member answers its self-view
-- (lib/hidden.lua, the reads' definition), from the twin board. nil when one needs the twins
-- and the call has none: only on a resend, since a call that applies events has asked for
-- them before writing (below).
local function standings()
  local out = {}
  local boards, order = {}, {}  -- key -> {standing, members, seen}; keys in first use
  for i = 1, n do
    local s = groups[all[i][GROUP] + 1].standing
    if s then
      local b = boards[s[1]]
      if not b then
        b = {standing = s, members = {}, seen = {}}
        boards[s[1]] = b
        order[#order + 1] = s[1]
      end
      local m = all[i][MEMBER]
      if not b.seen[m] then
        b.seen[m] = true
        b.members[#b.members + 1] = m
      end
    end
  end
  local ties = batch.ties
  local placed = {}  -- key -> member -> {rank, score, open} or false
  local missed, asked = {}, {}  -- the members missing from a board, each once
  for _, key in ipairs(order) do
    local b = boards[key]
    local scores = scores_of(key, b.members)
    b.side = tie_beside(ties, key, b.standing[2])
    local rank_of = tie_ranker(ties, key, b.side, desc)
    local here = {}
    for _, m in ipairs(b.members) do
      local score = scores[m]
      here[m] = score and {rank_of(m, score), score} or false
      if not score and not asked[m] then
        asked[m] = true
        missed[#missed + 1] = m
      end
    end
    placed[key] = here
  end
  if #missed > 0 then
    local fields = values_of('HMGET', moderation, missed)
    for _, key in ipairs(order) do
      local b = boards[key]
      local s, here = b.standing, placed[key]
      for _, m in ipairs(b.members) do
        if not here[m] and fields[m] then
          if not s.twin then return nil end
          local rank, score = hidden().view(ties, key, b.side, s.twin[1], s.twin[2], desc,
            s.cap, m, false)
          if rank then here[m] = {rank, score, hidden().mode(fields[m]) == 'open'} end
        end
      end
    end
  end
  local flagged = {}
  for i = 1, n do
    local s = groups[all[i][GROUP] + 1].standing
    local p = s and placed[s[1]][all[i][MEMBER]]
    out[2 * i - 1], out[2 * i] = p and p[1] or false, p and p[2] or false
    if p and p[3] then flagged[#flagged + 1] = i end
  end
  for _, i in ipairs(flagged) do out[#out + 1] = i end
  return out
end

-- The reply {'applied', applied, duplicates, held, banned, index, event id, reason of each
-- held event}, with the standings when asked ({'twins'} when they need the twins: above).
-- `held_list`: {{index, event id, reason}, ...}.
local function answer(ap, du, held_list, bn)
  local reply = {'applied', ap, du, #held_list, bn}
  for _, h in ipairs(held_list) do
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = h[1], h[2], h[3]
  end
  if batch.ties and not check_only then
    local got = standings()
    if not got then return {'twins'} end
    for _, x in ipairs(got) do reply[#reply + 1] = x end
  end
  return reply
end

-- A resend of a batch already applied (a retry after a timeout, by redis-py or the caller)
-- answers what the original did, even if the day has closed since; standings are read now.
-- The record is 'digest applied duplicates', then ' banned=<n>' when the batch had events of
-- banned members, then ' ' and the JSON of the held events ([[index, event id, reason],
-- ...]) when the batch held any.
local applied_at = (not approve) and redis.call('ZSCORE', batches, batch_id)
if applied_at and tonumber(applied_at) >= cutoff then
  local record = redis.call('HGET', batch_results, batch_id)
  if record then
    local was, ap, du, held_json = record:match('^(%S+) (%d+) (%d+) ?(.*)$')
    local bn, rest = held_json:match('^banned=(%d+) ?(.*)$')
    if bn then held_json = rest end
    if was ~= digest then
      return {'reused', 'batch id ' .. batch_id .. ' was already used for other events in the '
        .. 'last 48 hours: resend exactly the same events, or use a new batch id'}
    end
    local reply = answer(tonumber(ap), tonumber(du),
      held_json ~= '' and cjson.decode(held_json) or {}, tonumber(bn) or 0)
    -- Rewriting the record makes this call a write, so a WAIT after it waits for the
    -- replicas to hold everything up to now, the original batch included.
    if not check_only and reply[1] == 'applied' then
      redis.call('HSET', batch_results, batch_id, record)
    end
    return reply
  end
end

-- Approving a held event: only while its record is still held.
if approve then
  local record = redis.call('HGET', held.record, approve)
  local state = record and cjson.decode(record).state
  if state ~= 'held' then return {'not_held', state or false} end
end

-- Moderation (docs/fair-play.md): the state of each member of the batch, read once when the
-- board has any (member -> 'hidden', 'banned' or false); before the limits, which measure a
-- hidden member on the twins, where its entries are. The twins are asked for before anything
-- is written: a hidden member's events go there, and a standing of a hidden or banned member
-- is read there.
local state_of = {}
if not check_only and redis.call('EXISTS', moderation) == 1 then
  local list, needs_twins = {}, false
  for i = 1, n do
    local m = all[i][MEMBER]
    if state_of[m] == nil then
      state_of[m] = false
      list[#list + 1] = m
    end
  end
  for m, text in pairs(fields_of(moderation, list)) do
    -- The records are Seasons' own JSON: its state is all this script needs of one.
    local st = text and cjson.decode(text).state or false
    state_of[m] = st
    if st == 'hidden' or (st == 'banned' and batch.ties) then needs_twins = true end
  end
  if needs_twins and not batch.twins then return {'twins'} end
end

-- The group whose keys hold the entries of the i-th event's member: its twin for a hidden one.
local function home(i)
  local grp = groups[all[i][GROUP] + 1]
  if state_of[all[i][MEMBER]] == 'hidden' then return grp.twin end
  return grp
end

-- Pass 1: check everything; write nothing.
local errors = {'rejected'}
local function reject(i, field, code, message)
  local k = #errors
  errors[k + 1], errors[k + 2], errors[k + 3], errors[k + 4] = all[i][INDEX], field, code, message
end

for _, grp in ipairs(groups) do
  grp.day_closed = (not backfill) and redis.call('HEXISTS', state, 'closed:' .. grp.day) == 1
  grp.season_state = false
  if grp.season then grp.season_state = redis.call('HGET', state, 'season:' .. grp.season) end
  -- A day already folded into a rollup's base: its events go to the base too (ISO days
  -- compare as text the way they compare as dates).
  grp.folded = false
  local rollups = {}
  for _, r in ipairs(grp.rollups) do rollups[#rollups + 1] = r end
  for _, r in ipairs(grp.twin and grp.twin.rollups or {}) do rollups[#rollups + 1] = r end
  for _, r in ipairs(rollups) do
    if r.base then
      local through = redis.call('HGET', state, r.through)
      r.folded = through and grp.day <= through or false
      if r.folded and not grp.folded then grp.folded = {r.window, through} end
      -- What a trimmed board is recomputed from: the base, then the days after it (a day
      -- folded already is in the base; its key may still exist).
      local from = {{r.base, 1}}
      for _, d in ipairs(r.days) do
        if not through or d[3] > through then from[#from + 1] = d end
      end
      r.days = from
    end
  end
end

-- The event ids and the members' stored metadata the batch needs, each read once: one
-- ZMSCORE of the ids, one read of the members given metadata (fields_of).
local id_list, meta_members, wanted = {}, {}, {}
for i = 1, n do
  local id = event_id_of(i)
  if id and not wanted[id] then
    wanted[id] = true
    id_list[#id_list + 1] = id
  end
end
local recorded = scores_of(events, id_list)  -- id -> when it was applied, or false
-- Ids of events held (or held and decided since): seen, whatever the dedupe window says.
local held_known = {}
if held and not approve then held_known = fields_of(held.record, id_list) end

-- Holding (limits, docs/writes.md#held-events): decided per event in batch order, before its
-- metadata is merged (a held event changes nothing). Not in check-only mode (nothing is
-- held then), nor for a backfill or an approval.
local holding = limits and not backfill and not approve and not check_only
local rate, gain = limits and limits.rate, limits and limits.gain
local counts, members = {}, {}  -- member -> accepted events in the interval; the members
local rate_events = rate and rate.events
local gain_scores = {}  -- board key -> member -> its score as the batch leaves it so far
local gaining = false  -- whether gain_scores holds any member (one that could pass)
local held_as = {}  -- i -> {reason, score before (or false), window, limit}
local duplicate = {}  -- i -> true: the i-th event's id was seen (pass 1 below)
if holding then
  -- The board each group's events are limited on: its day board or its rollup of the
  -- window (none for a day outside every season, on the season window: nothing to limit).
  local gain_keys, rises = {}, {}  -- keys in first use; key -> the batch's rises summed
  local limited = {}  -- the groups, and their twins
  for _, grp in ipairs(gain and groups or {}) do
    limited[#limited + 1] = grp
    if grp.twin then limited[#limited + 1] = grp.twin end
  end
  for _, grp in ipairs(limited) do
    grp.gain = false
    if gain.window == 'day' then
      grp.gain = {key = grp.key, weight = 1}
    else
      for _, r in ipairs(grp.rollups) do
        if r.window == gain.window then grp.gain = {key = r.key, weight = r.weight, days = r.days} end
      end
    end
    local key = grp.gain and grp.gain.key
    if key and not rises[key] then
      rises[key] = 0
      gain_keys[#gain_keys + 1] = {key, grp.gain.days}
    end
  end
  -- One pass over the events: the members, each once (one read of their counters), and
  -- the contributions > 0 each gain board gets from the batch, summed.
  for i = 1, n do
    local ev = all[i]
    if rate then
      local m = ev[MEMBER]
      if not counts[m] then
        counts[m] = 0
        members[#members + 1] = m
      end
    end
    local t = gain and home(i).gain
    if t then
      local x = t.weight * ev[VALUE]
      if x > 0 then rises[t.key] = rises[t.key] + x end
    end
  end
  if rate then
    for m, text in pairs(fields_of(rate.key, members)) do counts[m] = tonumber(text) or 0 end
  end
  -- Only a member whose score could pass the limit in this batch is read: one whose
  -- contributions > 0 added to the board's best score (0 if higher: a member not on the
  -- board has none) do. On a trimmed `asc` board a member trimmed away may be above the
  -- best kept: every member is read there. A member's rises are at most the batch's on the
  -- board (sums of numbers > 0, in the same order, round alike): when those cannot pass,
  -- no member's can, and none is read.
  for _, kd in ipairs(gain_keys) do
    local key, days = kd[1], kd[2]
    local every = max_entries > 0 and not desc
    local bound = 0
    if not every and rises[key] > 0 then
      local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      if top[2] and tonumber(top[2]) > 0 then bound = tonumber(top[2]) end
    end
    local known = {}
    if rises[key] > 0 and (every or bound + rises[key] > gain.value) then
      local rise, read = {}, {}  -- member -> its rises summed; the members read
      for i = 1, n do
        local t = home(i).gain
        if t and t.key == key then
          local x = t.weight * all[i][VALUE]
          if x > 0 then rise[all[i][MEMBER]] = (rise[all[i][MEMBER]] or 0) + x end
        end
      end
      for m, r in pairs(rise) do
        if every or bound + r > gain.value then read[#read + 1] = m end
      end
      for from = 1, #read, 1000 do
        local upto = math.min(from + 999, #read)
        local got = redis.call('ZMSCORE', key, unpack(read, from, upto))
        for j = from, upto do
          local text = got[j - from + 1]
          if text then
            known[read[j]] = tonumber(text)
          elseif max_entries > 0 and days then
            -- trimmed away: its score is what the board recomputes it from
            known[read[j]] = aggregate_days(aggregate, days, read[j]) or 0
          else
            known[read[j]] = 0
          end
        end
      end
      gaining = gaining or #read > 0
    end
    gain_scores[key] = known  -- a member not in it cannot pass the limit in this batch
  end
end

-- The member of the i-th event's score on its day board before it: stored, then the values
-- of the batch's events accepted before it on that board (read only for an event held).
local function day_score(i)
  local g, member = all[i][GROUP], all[i][MEMBER]
  local text = redis.call('ZSCORE', home(i).key, member)
  local score = text and tonumber(text) or nil
  for j = 1, i - 1 do
    local ev = all[j]
    if ev[GROUP] == g and ev[MEMBER] == member and not duplicate[j] and not held_as[j] then
      local v = ev[VALUE]
      if score == nil or aggregate == 'set' then score = v else score = aggregate_pair(aggregate, score, v) end
    end
  end
  return score or false
end

-- Whether the i-th event (not a duplicate) is held: nil, or {reason, score, window, limit}.
-- An event that is not held is counted as accepted.
local function hold(i, grp)
  local member = all[i][MEMBER]
  local count = counts[member]  -- nil without member_rate
  if count and count >= rate_events then
    return {'member_rate', day_score(i), 'day', rate_events}
  end
  if gaining then
    local t = grp.gain
    local known = t and gain_scores[t.key]
    local before = known and known[member]
    if before then
      local x = t.weight * all[i][VALUE]
      if x > 0 and before + x > gain.value then
        return {'max_period_gain', before, gain.window, gain.value}
      end
      known[member] = before + x
    end
  end
  if count then counts[member] = count + 1 end
  return nil
end
wanted = {}
for i = 1, n do
  local m = all[i][MEMBER]
  if metadata_of(i) and not wanted[m] then
    wanted[m] = true
    meta_members[#meta_members + 1] = m
  end
end
local stored_meta = fields_of(meta, meta_members)  -- member -> its JSON, or false

-- What pass 1 found for the i-th event: a duplicate, the metadata text to write ('' to delete).
local seen, merged_meta = {}, {}
local meta_text = {}
for i = 1, n do
  local grp = groups[all[i][GROUP] + 1]
  local event_id, given_meta = event_id_of(i), metadata_of(i)
  if grp.season_state then
    reject(i, 'ts', 'season_closed', 'season ' .. grp.season .. ' is ' .. grp.season_state)
  elseif grp.day_closed then
    reject(i, 'ts', 'late_event', 'day ' .. grp.day .. ' is closed')
  elseif grp.folded and aggregate == 'set' then
    reject(i, 'ts', 'day_folded', 'day ' .. grp.day .. ' is folded into the ' .. grp.folded[1]
      .. ' base already (through ' .. grp.folded[2] .. '), and a set board\'s base does not '
      .. 'keep which day each value came from: its events can no longer be applied')
  end
  if event_id then
    local at = recorded[event_id]
    if event_id ~= approve
        and (seen[event_id] or held_known[event_id] or (at and tonumber(at) >= cutoff)) then
      duplicate[i] = true
    end
    seen[event_id] = true
  end
  if holding and not duplicate[i] then
    local member = all[i][MEMBER]
    local count = counts[member]
    if gaining or (count and count >= rate_events) then
      held_as[i] = hold(i, home(i))
    elseif count then
      counts[member] = count + 1  -- what hold() finds: no limit reached, the event counted
    end
  end
  if given_meta and not duplicate[i] and not held_as[i] then
    local member = all[i][MEMBER]
    local as_given = given_meta:sub(1, 1) == '='
    local given = given_meta:sub(2)
    local current = merged_meta[member]
    local same = false
    if current == nil then
      local stored = stored_meta[member]
      -- The metadata the member has already, sent again (games send it with every score):
      -- merging it changes nothing, and both texts are the same canonical JSON (sorted
      -- keys, compact, as seasons/events.py and json_flat write it), so compare texts.
      if stored and stored == given and as_given then
        merged_meta[member] = stored
        same = true
      elseif stored then
        current = cjson.decode(stored)
      elseif as_given then
        current = false  -- nothing stored, nothing to delete: the given JSON as it is
      else
        current = {}
      end
    elseif type(current) == 'string' then
      if current == given and as_given then
        same = true  -- as given (or stored) earlier in this batch, given again
      else
        current = cjson.decode(current)  -- stored as given earlier in this batch
      end
    end
    if same then
      meta_text[i] = nil  -- nothing to write
    elseif current == false then
      -- seasons/events.py checked the field count and size of exactly this JSON.
      merged_meta[member] = given
      meta_text[i] = given
    else
      for k, v in pairs(cjson.decode(given)) do
        if v == null then current[k] = nil else current[k] = v end
      end
      local text, nfields = json_flat(current)
      if nfields > batch.meta_max_fields then
        reject(i, 'metadata', 'metadata_too_large', 'metadata would have ' .. nfields
          .. ' fields after merging (at most ' .. batch.meta_max_fields .. ')')
      elseif #text > batch.meta_max_bytes then
        reject(i, 'metadata', 'metadata_too_large', 'metadata would be ' .. #text
          .. ' bytes as JSON after merging (at most ' .. batch.meta_max_bytes .. ')')
      end
      merged_meta[member] = current
      meta_text[i] = nfields > 0 and text or ''
    end
  end
end
if #errors > 1 then return errors end
if check_only then return {'applied', 0, 0, 0, 0} end

-- Moderation: a banned member's events (neither duplicates nor held) are applied nowhere, a
-- hidden member's go to the twins.
local banned_as, hidden_as = {}, {}  -- i -> true
for i = 1, n do
  local st = not duplicate[i] and not held_as[i] and state_of[all[i][MEMBER]]
  if st == 'banned' then
    banned_as[i] = true
  elseif st == 'hidden' then
    hidden_as[i] = true
  end
end

-- The rate counters as pass 1 left them, written first: their fields are fresh from the
-- read that found them.
if holding and rate then
  local counters = {}  -- a member whose events were all held or duplicates keeps its count
  for _, m in ipairs(members) do
    local c = counts[m]
    if c > 0 then
      counters[#counters + 1] = m
      counters[#counters + 1] = c
    end
  end
  if #counters > 0 then
    chunked(counters, 1000, function(...) redis.call('HSET', rate.key, ...) end)
    redis.call('EXPIREAT', rate.key, rate.expire_at)
  end
end

-- Pass 2: apply.
local function put(key, member, value)
  if aggregate == 'sum' then
    redis.call('ZINCRBY', key, value, member)
  elseif aggregate == 'max' then
    redis.call('ZADD', key, 'GT', value, member)
  elseif aggregate == 'min' then
    redis.call('ZADD', key, 'LT', value, member)
  else
    redis.call('ZADD', key, value, member)
  end
end

-- Set boards: whether a day after the event's, in its rollup's period, has the member.
local function later_has(later, member)
  for k = 1, #later do
    if redis.call('ZSCORE', later[k], member) then return true end
  end
  return false
end

-- A trimmed board holds only members with their exact score: a member that is not on it
-- gets its score recomputed from the day keys, never an increment on a partial score.
-- A member whose score gets worse on a full board may fall below members trimmed away
-- earlier: that board is rebuilt from its day keys (aggregate_store) before it is trimmed.
-- On a set board the caller has checked that the event's day is the latest with the member:
-- weight x value is its score, whatever it had.
-- `dist`: the board's distinct set, or nil.
local stale = {}
local function put_trimmed(key, days, member, value, weight, dist, twin)
  local text = redis.call('ZSCORE', key, member)
  if text then
    local old = tonumber(text)
    local new = weight * value
    if aggregate ~= 'set' then new = aggregate_pair(aggregate, old, new) end
    if not twin and ((desc and new < old) or (not desc and new > old)) then
      if redis.call('ZCARD', key) >= max_entries then stale[key] = {days, dist} end
    end
    put(key, member, weight * value)
    if dist then distinct_settle(key, dist, member, text) end
    return
  end
  local total
  if aggregate == 'set' then
    total = weight * value
  else
    total = aggregate_days(aggregate, days, member)
  end
  if total then
    redis.call('ZADD', key, total, member)
    if dist then distinct_settle(key, dist, member, nil) end
  end
end

-- ties = "dense": `dist`, the distinct set of `key`, made ready to be kept: one missing
-- beside a non-empty board (written before distinct sets existed) is built from it, once
-- per call.
local distinct_ready = {}
local function ready(key, dist)
  if distinct_ready[dist] then return end
  distinct_ready[dist] = true
  if redis.call('EXISTS', dist) == 0 and redis.call('ZCARD', key) > 0 then
    distinct_rebuild(key, dist)
  end
end

-- The distinct-set upkeep of the batch, applied once at its end (flush_distinct): per
-- distinct set, its board, the new scores (added in one ZADD) and the old ones (each removed
-- if no member has it any more, checked once however many members left it).
local pending = {}

local function flush_distinct()
  for dist, p in pairs(pending) do
    for from = 1, #p.added, 500 do  -- unpack has a limit
      local args = {}
      for i = from, math.min(from + 499, #p.added) do
        args[#args + 1] = p.added[i]
        args[#args + 1] = p.added[i]
      end
      redis.call('ZADD', dist, unpack(args))
    end
    for old in pairs(p.left) do
      if redis.call('ZCOUNT', p.key, old, old) == 0 then redis.call('ZREM', dist, old) end
    end
  end
  pending = {}
end

-- The scores of the batch's members on the boards kept with a distinct set, read before
-- pass 2 with one ZMSCORE per board (prefetch_scores) and followed through it: key ->
-- member -> Redis's text of its score, or false (not on the board).
local scores_on = {}

local function prefetch_scores()
  local wanted = {}  -- key -> list of members, each once
  local function want(key, member)
    local w = wanted[key]
    if not w then
      w = {list = {}, seen = {}}
      wanted[key] = w
    end
    if not w.seen[member] then
      w.seen[member] = true
      w.list[#w.list + 1] = member
    end
  end
  for i = 1, n do
    if not duplicate[i] then
      local grp = groups[all[i][GROUP] + 1]
      if grp.distinct then want(grp.key, all[i][MEMBER]) end
      if max_entries == 0 then
        for _, r in ipairs(grp.rollups) do
          if r.distinct then want(r.key, all[i][MEMBER]) end
        end
      end
    end
  end
  for key, w in pairs(wanted) do
    scores_on[key] = scores_of(key, w.list)
  end
end

-- `put` on a board with the distinct set `dist`, kept with it: nothing more when the score
-- did not change (ZINCRBY answers the new score's text, ZADD CH whether it changed).
local function put_distinct(key, dist, member, value)
  ready(key, dist)
  local known = scores_on[key]
  local old = known[member]
  local new
  if aggregate == 'sum' then
    new = redis.call('ZINCRBY', key, value, member)
  else
    local changed
    if aggregate == 'max' then
      changed = redis.call('ZADD', key, 'GT', 'CH', value, member)
    elseif aggregate == 'min' then
      changed = redis.call('ZADD', key, 'LT', 'CH', value, member)
    else
      changed = redis.call('ZADD', key, 'CH', value, member)
    end
    if changed == 0 then return end
    new = redis.call('ZSCORE', key, member)
  end
  known[member] = new
  new = distinct_text(new)
  if old then old = distinct_text(old) end
  if new == old then return end
  local p = pending[dist]
  if not p then
    p = {key = key, added = {}, seen = {}, left = {}}
    pending[dist] = p
  end
  if not p.seen[new] then
    p.seen[new] = true
    p.added[#p.added + 1] = new
  end
  if old then p.left[old] = true end
end

-- ties = "earliest": the reach of `member` on the board whose reach set is `reached`, after
-- a contribution `x` (weight x value) of an event at `ts`; `old` is the board's score before
-- it (nil: the member is new there), `changed` whether the day score changed (sum).
local function reach(reached, member, old, x, ts, changed)
  if old == nil or aggregate == 'set' then
    redis.call('ZADD', reached, ts, member)
  elseif aggregate == 'sum' then
    if changed then redis.call('ZADD', reached, 'GT', ts, member) end
  elseif (aggregate == 'max' and x > old) or (aggregate == 'min' and x < old) then
    redis.call('ZADD', reached, ts, member)
  elseif x == old then
    redis.call('ZADD', reached, 'LT', ts, member)
  end
end

-- A member's score on `key`, or nil (ZSCORE answers false for none).
local function score_of(key, member)
  local s = redis.call('ZSCORE', key, member)
  if s then return tonumber(s) end
  return nil
end

local applied, duplicates, banned = 0, 0, 0
for _, grp in ipairs(groups) do
  grp.applied = 0
  if grp.twin then grp.twin.applied = 0 end
end
prefetch_scores()
-- The batch's new event ids (one ZADD at the end) and each member's metadata as the batch
-- leaves it (one HSET, one HDEL), in the order of first change.
local new_ids, final_meta, meta_order = {}, {}, {}
for i = 1, n do
  local grp = groups[all[i][GROUP] + 1]
  if duplicate[i] then
    duplicates = duplicates + 1
  elseif held_as[i] or banned_as[i] then
    -- Applied nowhere: held, kept for review (below), or of a banned member; its id seen.
    if banned_as[i] then banned = banned + 1 end
    local id = event_id_of(i)
    if id then
      new_ids[#new_ids + 1] = now
      new_ids[#new_ids + 1] = id
    end
  else
    -- A hidden member's event goes to the twins of its group, as a visible one's would go to
    -- its group (no distinct set there, and no trim).
    if hidden_as[i] then grp = grp.twin end
    local member, value = all[i][MEMBER], all[i][VALUE]
    grp.applied = grp.applied + 1
    local changed = true
    if grp.reached then
      local old = score_of(grp.key, member)
      put(grp.key, member, value)
      changed = old == nil or score_of(grp.key, member) ~= old
      reach(grp.reached, member, old, value, all[i][TS], changed)
    elseif grp.distinct then
      put_distinct(grp.key, grp.distinct, member, value)
    else
      put(grp.key, member, value)
    end
    local rollups = grp.rollups
    for j = 1, #rollups do
      local r = rollups[j]
      -- A day folded into the window's base: the base must hold its events too.
      if r.folded then put(r.base, member, r.weight * value) end
      if aggregate == 'set' and later_has(r.later, member) then
        -- a later day's value stands: the rollup does not change
      elseif max_entries > 0 then
        if r.distinct then ready(r.key, r.distinct) end
        put_trimmed(r.key, r.days, member, value, r.weight, r.distinct, grp.is_twin)
      elseif r.reached then
        local x = r.weight * value
        reach(r.reached, member, score_of(r.key, member), x, all[i][TS], changed)
        put(r.key, member, x)
      elseif r.distinct then
        put_distinct(r.key, r.distinct, member, r.weight * value)
      else
        put(r.key, member, r.weight * value)
      end
    end
    local id = event_id_of(i)
    if id then
      new_ids[#new_ids + 1] = now
      new_ids[#new_ids + 1] = id
    end
    local text = meta_text[i]
    if text then
      if final_meta[member] == nil then meta_order[#meta_order + 1] = member end
      final_meta[member] = text
    end
  end
end
chunked(new_ids, 1000, function(...) redis.call('ZADD', events, ...) end)
-- The held events: one record each (its "state" first, which a decision rewrites), the
-- batch's answer lists them. An event without an id is named by its batch id and index.
local held_list, held_set, held_order = {}, {}, {}
for i = 1, n do
  local h = held_as[i]
  if h then
    local ev = all[i]
    local id = event_id_of(i) or (batch_id .. '#' .. ev[INDEX])
    local meta_given = metadata_of(i)
    local record = '{"state":"held","event_id":' .. json_string(id)
      .. ',"generated":' .. (event_id_of(i) and 'false' or 'true')
      .. ',"batch_id":' .. json_string(batch_id) .. ',"index":' .. ev[INDEX]
      .. ',"member":' .. json_string(ev[MEMBER]) .. ',"value":' .. json_number(ev[VALUE])
      .. ',"ts":' .. json_number(ev[TS]) .. ',"day":' .. json_string(groups[ev[GROUP] + 1].day)
      .. ',"metadata":' .. (meta_given and meta_given:sub(2) or 'null')
      .. ',"metadata_merge":' .. (meta_given and meta_given:sub(1, 1) == '~' and 'true' or 'false')
      .. ',"reason":' .. json_string(h[1]) .. ',"window":' .. json_string(h[3])
      .. ',"score":' .. (h[2] and json_number(h[2]) or 'null')
      .. ',"limit":' .. json_number(h[4]) .. ',"arrived_at":' .. json_number(now) .. '}'
    held_list[#held_list + 1] = {ev[INDEX], id, h[1]}
    held_set[#held_set + 1] = id
    held_set[#held_set + 1] = record
    held_order[#held_order + 1] = now
    held_order[#held_order + 1] = id
  end
end
if #held_list > 0 then
  chunked(held_set, 1000, function(...) redis.call('HSET', held.record, ...) end)
  chunked(held_order, 1000, function(...) redis.call('ZADD', held.order, ...) end)
  redis.call('EXPIREAT', held.record, held.expire_at)
  redis.call('EXPIREAT', held.order, held.expire_at)
end
if approve then
  -- The record, decided: its state rewritten in place (the rest is the text stored).
  local record = redis.call('HGET', held.record, approve)
  local rest = record:sub(#'{"state":"held",' + 1)
  redis.call('HSET', held.record, approve,
    '{"state":"approved","decided_at":' .. json_number(now) .. ',' .. rest)
  redis.call('ZREM', held.order, approve)
  redis.call('ZADD', held.done, now, approve)
  redis.call('EXPIREAT', held.done, held.expire_at)
end
local meta_set, meta_del = {}, {}
for _, member in ipairs(meta_order) do
  local text = final_meta[member]
  if text == '' then
    meta_del[#meta_del + 1] = member
  else
    meta_set[#meta_set + 1] = member
    meta_set[#meta_set + 1] = text
  end
end
chunked(meta_set, 1000, function(...) redis.call('HSET', meta, ...) end)
chunked(meta_del, 1000, function(...) redis.call('HDEL', meta, ...) end)
flush_distinct()  -- before the rebuilds and trims below, which read the distinct sets
for key, found in pairs(stale) do
  aggregate_store(key, found[1], aggregate, scratch)
  if found[2] then distinct_rebuild(key, found[2]) end
end
local written = {}
for _, grp in ipairs(groups) do
  written[#written + 1] = grp
  if grp.twin then written[#written + 1] = grp.twin end
end
for _, grp in ipairs(written) do
  if grp.applied > 0 then
    applied = applied + grp.applied
    redis.call('EXPIREAT', grp.key, grp.expire_at)
    if grp.reached then redis.call('EXPIREAT', grp.reached, grp.expire_at) end
    if grp.distinct then redis.call('EXPIREAT', grp.distinct, grp.expire_at) end
    for _, r in ipairs(grp.rollups) do
      if max_entries > 0 and not grp.is_twin then
        trim_board(r.key, desc, max_entries, r.distinct)
      end
      if r.expire_at then
        redis.call('EXPIREAT', r.key, r.expire_at)
        if r.reached then redis.call('EXPIREAT', r.reached, r.expire_at) end
        if r.distinct then redis.call('EXPIREAT', r.distinct, r.expire_at) end
      end
    end
  end
end
if applied > 0 or duplicates > 0 or banned > 0 or #held_list > 0 then
  redis.call('ZREMRANGEBYSCORE', events, '-inf', '(' .. cutoff)
  if redis.call('EXISTS', events) == 1 then
    redis.call('EXPIREAT', events, batch.events_expire_at)
  end
end
-- Record the result; drop at most 100 expired batch ids per write (bounded work: each
-- write adds one, so the backlog shrinks), and keep both keys for 48 hours after the last.
local expired = redis.call('ZRANGEBYSCORE', batches, '-inf', '(' .. cutoff, 'LIMIT', 0, 100)
if #expired > 0 then
  redis.call('ZREM', batches, unpack(expired))
  redis.call('HDEL', batch_results, unpack(expired))
end
-- Held records past retention, and decided ones past the dedupe window: at most 100 of
-- each per write, the same bounded work. A board that never held an event has neither key.
if held and redis.call('EXISTS', held.order, held.done) > 0 then
  for _, drop in ipairs({{held.order, held.cutoff}, {held.done, cutoff}}) do
    local old = redis.call('ZRANGEBYSCORE', drop[1], '-inf', '(' .. drop[2], 'LIMIT', 0, 100)
    if #old > 0 then
      redis.call('ZREM', drop[1], unpack(old))
      redis.call('HDEL', held.record, unpack(old))
    end
  end
end
if approve then return answer(applied, duplicates, {}, banned) end  -- nothing is held then
local record = digest .. ' ' .. applied .. ' ' .. duplicates
if banned > 0 then record = record .. ' banned=' .. banned end
if #held_list > 0 then
  local parts = {}
  for k, h in ipairs(held_list) do
    parts[k] = '[' .. h[1] .. ',' .. json_string(h[2]) .. ',' .. json_string(h[3]) .. ']'
  end
  record = record .. ' [' .. table.concat(parts, ',') .. ']'
end
redis.call('ZADD', batches, now, batch_id)
redis.call('HSET', batch_results, batch_id, record)
redis.call('EXPIREAT', batches, batch.events_expire_at)
redis.call('EXPIREAT', batch_results, batch.events_expire_at)
return answer(applied, duplicates, held_list, banned)
