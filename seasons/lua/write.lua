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
--   league            null, or the board's league (docs/leagues.md#joining,
--                     lib/league_join.lua): {span, size, tiers, group_by, state, tier}: the
--                     places of a cohort in a period's `joined` (COHORT_SPAN), cohort_size,
--                     the tiers lowest first, the metadata field whose text value groups
--                     cohorts ('' for none), the league's state hash and its tier hash (member
--                     -> tier). Then each member's first accepted event (applied: not a
--                     duplicate, held or banned; a hidden member's is) of a group's league
--                     period joins a cohort, waits for the previous period's close, or not
--                     (its ts at or after join_until, the period closing or closed, or
--                     before the league's first period), in batch order
--   groups            one per local day of the batch, each
--                       {day, season, key, reached, distinct, expire_at, rollups, twin?,
--                       league?}: its day
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
--                     league (with the batch's `league`): null (a day in no season), or the
--                     period of the league's window holding the day: {period, previous,
--                     start, join_until, expire_at, joined, cohorts, open, counts}: its id,
--                     the id of the period before it (or null), its start and the instant
--                     from which first events join no cohort (epoch seconds), the EXPIREAT
--                     of its keys, its joined sorted set, cohorts, open and counts hashes
--                     (seasons.keys: Keys.league); the groups of one period name the same;
--                     null in a twin
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

--
-- The script reads as the flow of one batch; each part it calls is a fragment of its own:
-- the batch checked (lib/write_batch.lua) -> a resend answered -> the members' moderation
-- looked up -> pass 1, every event checked (duplicates, closed days, metadata merged) and
-- the limits deciding which are held (lib/limits.lua) -> pass 2, the events applied
-- (lib/apply.lua) -> the event ids, held records and metadata recorded -> the answer, with
-- the standings when asked (lib/write_standing.lua).

--! include json
--! include write_batch
--! include bulk
--! include limits
--! include apply
--! include held_records
--! include write_standing
--! include league_join

local ok, batch = pcall(parse_batch)
if not ok then return redis.error_reply('write.lua: ' .. tostring(batch)) end

local now, aggregate, cutoff = batch.now, batch.aggregate, batch.cutoff
local backfill, check_only = batch.backfill, batch.check_only
local state, events, meta = batch.keys.state, batch.keys.events, batch.keys.meta
local moderation = batch.keys.moderation
local batches, batch_results = batch.keys.batches, batch.keys.batch_results
local batch_id, digest = batch.batch_id, batch.digest
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


-- The reply {'applied', applied, duplicates, held, banned, index, event id, reason of each
-- held event}, with the standings when asked ({'twins'} when they need the twins: below).
-- `held_list`: {{index, event id, reason}, ...}.
local function answer(ap, du, held_list, bn)
  local reply = {'applied', ap, du, #held_list, bn}
  for _, h in ipairs(held_list) do
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = h[1], h[2], h[3]
  end
  if batch.ties and not check_only then
    local got = write_standings(batch)
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

-- Holding (lib/limits.lua): decided per event in batch order, in pass 1, before its
-- metadata is merged (a held event changes nothing). Not in check-only mode (nothing is
-- held then), nor for a backfill or an approval.
local duplicate = {}  -- i -> true: the i-th event's id was seen (pass 1 below)
local held_as = {}  -- i -> {reason, score before (or false), window, limit}
local holder = limits and not backfill and not approve and not check_only
  and new_holding(batch, home, duplicate, held_as)
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
-- A league with group_by: each event's member's metadata as the batch leaves it at that
-- event (its JSON text, or {value of the field}; nil: untouched so far), for its join.
local group_by = batch.league and batch.league.group_by ~= '' and batch.league.group_by
local meta_at, last_meta = {}, {}
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
  if holder and not duplicate[i] then holder.decide(i) end
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
  if group_by then
    local member = all[i][MEMBER]
    if given_meta and not duplicate[i] and not held_as[i] then
      local now_meta = merged_meta[member]
      last_meta[member] = type(now_meta) == 'table' and {now_meta[group_by]} or now_meta
    end
    meta_at[i] = last_meta[member]
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

if holder then holder.write_counters() end

-- Pass 2: apply (lib/apply.lua).
local duplicates, banned = 0, 0
local writer = new_board_writer(batch, duplicate)
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
    local member = all[i][MEMBER]
    writer.apply(grp, member, all[i][VALUE], all[i][TS])
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
-- Leagues (lib/league_join.lua): the members' joins, in batch order.
if batch.league then
  local periods, listed = {}, {}  -- the groups' league periods, each once
  for _, grp in ipairs(groups) do
    local P = grp.league
    if P and not listed[P.period] then
      listed[P.period] = true
      periods[#periods + 1] = P
    end
  end
  local function skip(i) return duplicate[i] or held_as[i] or banned_as[i] end
  join_batch(batch.league, periods, n, function(i)
    if skip(i) then return nil end
    return groups[all[i][GROUP] + 1].league, all[i][MEMBER], all[i][TS]
  end, function(i) return meta_at[i] end, function(members) return fields_of(meta, members) end,
  {rows = all, columns = {group = GROUP, member = MEMBER, ts = TS}, groups = groups,
   skip = skip})
end
-- The held events, recorded for review (lib/held_records.lua); an approval's record decided.
local held_list = keep_held(batch, held_as, event_id_of, metadata_of)
if approve then approve_held(held, approve, now) end
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
local applied = writer.settle()
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
if held then drop_old_held(held, cutoff) end
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
