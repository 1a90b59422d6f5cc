-- Apply one validated batch of events to ONE board, atomically (SPEC sections 4 and 6).
--
-- KEYS[1] state hash   KEYS[2] events zset (idempotency)   KEYS[3] meta hash
-- KEYS[4] batches zset (batch id -> epoch seconds)   KEYS[5] batch results hash
-- KEYS[6..] per day group: day key, week key, season key (KEYS[1] when the day has no season);
--           then, when max_entries > 0, the day keys that trimmed boards recompute from.
-- ARGV: now, aggregate (sum|max|min), order (desc|asc), max_entries, dedupe_cutoff,
--       events_expireat, backfill (0|1), check_only (0|1), meta_max_fields, meta_max_bytes,
--       group count, batch_id, batch digest; then per group:
--         day_id, season_id ('' = none), week_weight, season_weight,
--         day_expireat, week_expireat, season_expireat,
--         [if max_entries > 0: n week days, (key index, weight) * n,
--                              n season days, (key index, weight) * n]
--       then the events in batch order, each: group number, index in the batch, member, value,
--       event_id ('' = none), metadata: '' (none), '=' .. JSON (no nulls: stored as given when
--       the member has no metadata yet) or '~' .. JSON (has nulls: always merged)
-- Events are checked and applied in batch order, whatever their day, so that duplicates
-- within a batch and metadata merges behave as if submitted one by one.
-- A batch id applied on this board since dedupe_cutoff answers its recorded result at once
-- (in check-only mode too) and writes nothing new; with another digest it is refused.
-- Returns {applied, duplicates}, {-1, index, code, message, index, code, message, ...}
-- or {-2, message} (batch id reused with other content); on the last two nothing was written.

local now = tonumber(ARGV[1])
local aggregate = ARGV[2]
local desc = ARGV[3] == 'desc'
local max_entries = tonumber(ARGV[4])
local cutoff = tonumber(ARGV[5])
local events_expireat = ARGV[6]
local backfill = ARGV[7] == '1'
local check_only = ARGV[8] == '1'
local meta_max_fields = tonumber(ARGV[9])
local meta_max_bytes = tonumber(ARGV[10])
local ngroups = tonumber(ARGV[11])
local batch_id, digest = ARGV[12], ARGV[13]

local state, events, meta = KEYS[1], KEYS[2], KEYS[3]
local batches, batch_results = KEYS[4], KEYS[5]

-- A resend of a batch already applied (a retry after a timeout, by redis-py or the caller)
-- answers what the original did, even if the day has closed since. The record is
-- 'digest applied duplicates'.
local applied_at = redis.call('ZSCORE', batches, batch_id)
if applied_at and tonumber(applied_at) >= cutoff then
  local record = redis.call('HGET', batch_results, batch_id)
  if record then
    local was, ap, du = record:match('^(%S+) (%d+) (%d+)$')
    if was ~= digest then
      return {-2, 'batch id ' .. batch_id .. ' was already used for other events in the '
        .. 'last 48 hours: resend exactly the same events, or use a new batch id'}
    end
    -- Rewriting the record makes this call a write, so a WAIT after it waits for the
    -- replicas to hold everything up to now, the original batch included.
    if not check_only then redis.call('HSET', batch_results, batch_id, record) end
    return {tonumber(ap), tonumber(du)}
  end
end

-- Parse the groups.
local groups = {}
local all = {}
local a = 14
for g = 1, ngroups do
  local k = 6 + (g - 1) * 3
  local grp = {
    day = KEYS[k], week = KEYS[k + 1], season = KEYS[k + 2],
    day_id = ARGV[a], season_id = ARGV[a + 1],
    week_w = tonumber(ARGV[a + 2]), season_w = tonumber(ARGV[a + 3]),
    day_exp = ARGV[a + 4], week_exp = ARGV[a + 5], season_exp = ARGV[a + 6],
    week_days = {}, season_days = {},
  }
  a = a + 7
  if max_entries > 0 then
    for _, list in ipairs({grp.week_days, grp.season_days}) do
      local m = tonumber(ARGV[a])
      a = a + 1
      for _ = 1, m do
        list[#list + 1] = {KEYS[tonumber(ARGV[a])], tonumber(ARGV[a + 1])}
        a = a + 2
      end
    end
  end
  groups[g] = grp
end
for i = a, #ARGV, 6 do
  all[#all + 1] = {
    grp = groups[tonumber(ARGV[i])], index = ARGV[i + 1], member = ARGV[i + 2],
    value = tonumber(ARGV[i + 3]), event_id = ARGV[i + 4], meta = ARGV[i + 5],
  }
end

-- Flat JSON objects only (strings, numbers, booleans): encode with sorted keys and the
-- shortest number form that reads back as the same double (cjson stops at 14 digits).
local function encode_number(x)
  for p = 15, 17 do
    local s = string.format('%.' .. p .. 'g', x)
    if tonumber(s) == x then return s end
  end
end

-- Strings as Python's json.dumps(ensure_ascii=False) writes them, so that the size checked
-- here is the size seasons/events.py checks (cjson would write '/' as '\/' and DEL as '\u007f').
local string_escapes = {
  ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
  ['\r'] = '\\r', ['\t'] = '\\t',
}
local function encode_string(text)
  local body = text:gsub('[%z\1-\31"\\]', function(c)
    return string_escapes[c] or string.format('\\u%04x', c:byte())
  end)
  return '"' .. body .. '"'
end

local function encode_flat(obj)
  local names = {}
  for k in pairs(obj) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for i, k in ipairs(names) do
    local v = obj[k]
    local t = type(v)
    local enc
    if t == 'number' then enc = encode_number(v)
    elseif t == 'boolean' then enc = v and 'true' or 'false'
    else enc = encode_string(v) end
    parts[i] = encode_string(k) .. ':' .. enc
  end
  return '{' .. table.concat(parts, ',') .. '}', #names
end

-- Pass 1: check everything; write nothing.
local errors = {}
local function reject(ev, code, message)
  errors[#errors + 1] = ev.index
  errors[#errors + 1] = code
  errors[#errors + 1] = message
end

local seen = {}
local merged_meta = {}
for _, grp in ipairs(groups) do
  grp.day_closed = (not backfill) and redis.call('HEXISTS', state, 'closed:' .. grp.day_id) == 1
  grp.season_state = false
  if grp.season_id ~= '' then
    grp.season_state = redis.call('HGET', state, 'season:' .. grp.season_id)
  end
end
for _, ev in ipairs(all) do
  local grp = ev.grp
  if grp.season_state then
    reject(ev, 'season_closed', 'season ' .. grp.season_id .. ' is ' .. grp.season_state)
  elseif grp.day_closed then
    reject(ev, 'late_event', 'day ' .. grp.day_id .. ' is closed')
  end
  if ev.event_id ~= '' then
    if seen[ev.event_id] then
      ev.duplicate = true
    else
      local at = redis.call('ZSCORE', events, ev.event_id)
      if at and tonumber(at) >= cutoff then ev.duplicate = true end
      seen[ev.event_id] = true
    end
  end
  if ev.meta ~= '' and not ev.duplicate then
    local given = ev.meta:sub(2)
    local current = merged_meta[ev.member]
    local same = false
    if current == nil then
      local stored = redis.call('HGET', meta, ev.member)
      -- The metadata the member has already, sent again (games send it with every score):
      -- merging it changes nothing, and both texts are the same canonical JSON (sorted
      -- keys, compact, as seasons/events.py and encode_flat write it), so compare texts.
      if stored and stored == given and ev.meta:sub(1, 1) == '=' then
        merged_meta[ev.member] = stored
        same = true
      elseif stored then
        current = cjson.decode(stored)
      elseif ev.meta:sub(1, 1) == '=' then
        current = false  -- nothing stored, nothing to delete: the given JSON as it is
      else
        current = {}
      end
    elseif type(current) == 'string' then
      if current == given and ev.meta:sub(1, 1) == '=' then
        same = true  -- as given (or stored) earlier in this batch, given again
      else
        current = cjson.decode(current)  -- stored as given earlier in this batch
      end
    end
    if same then
      ev.meta_text = nil  -- nothing to write
    elseif current == false then
      -- seasons/events.py checked the field count and size of exactly this JSON.
      merged_meta[ev.member] = given
      ev.meta_text = given
      ev.meta_empty = false
    else
      for k, v in pairs(cjson.decode(given)) do
        if v == cjson.null then current[k] = nil else current[k] = v end
      end
      local text, nfields = encode_flat(current)
      if nfields > meta_max_fields then
        reject(ev, 'metadata_too_large', 'metadata would have ' .. nfields
          .. ' fields after merging (at most ' .. meta_max_fields .. ')')
      elseif #text > meta_max_bytes then
        reject(ev, 'metadata_too_large', 'metadata would be ' .. #text
          .. ' bytes as JSON after merging (at most ' .. meta_max_bytes .. ')')
      end
      merged_meta[ev.member] = current
      ev.meta_text = text
      ev.meta_empty = nfields == 0
    end
  end
end
if #errors > 0 then
  table.insert(errors, 1, -1)
  return errors
end
if check_only then return {0, 0} end

-- Pass 2: apply.
local function agg(x, y)
  if aggregate == 'sum' then return x + y end
  if aggregate == 'max' then return math.max(x, y) end
  return math.min(x, y)
end

local function put(key, member, value)
  if aggregate == 'sum' then
    redis.call('ZINCRBY', key, value, member)
  elseif aggregate == 'max' then
    redis.call('ZADD', key, 'GT', value, member)
  else
    redis.call('ZADD', key, 'LT', value, member)
  end
end

-- A trimmed board holds only members with their exact score: a member that is not on it
-- gets its score recomputed from the day keys, never an increment on a partial score.
-- A member whose score gets worse on a full board may fall below members trimmed away
-- earlier: that board is rebuilt from its day keys (see `rebuild`) before it is trimmed.
local stale = {}
local function put_trimmed(key, days, member, value, weight)
  local old = redis.call('ZSCORE', key, member)
  if old then
    old = tonumber(old)
    local new = agg(old, weight * value)
    if (desc and new < old) or (not desc and new > old) then
      if redis.call('ZCARD', key) >= max_entries then stale[key] = days end
    end
    put(key, member, weight * value)
    return
  end
  local total = nil
  for _, d in ipairs(days) do
    local s = redis.call('ZSCORE', d[1], member)
    if s then
      local x = d[2] * tonumber(s)
      total = total and agg(total, x) or x
    end
  end
  if total then redis.call('ZADD', key, total, member) end
end

local function rebuild(key, days)
  local args = {'ZUNIONSTORE', key, #days}
  for _, d in ipairs(days) do args[#args + 1] = d[1] end
  args[#args + 1] = 'WEIGHTS'
  for _, d in ipairs(days) do args[#args + 1] = d[2] end
  args[#args + 1] = 'AGGREGATE'
  args[#args + 1] = aggregate
  redis.call(unpack(args))
end

local function trim(key)
  if desc then
    redis.call('ZREMRANGEBYRANK', key, 0, -(max_entries + 1))
  else
    redis.call('ZREMRANGEBYRANK', key, max_entries, -1)
  end
end

local applied, duplicates = 0, 0
for _, grp in ipairs(groups) do grp.applied = 0 end
for _, ev in ipairs(all) do
  local grp = ev.grp
  local has_season = grp.season_id ~= ''
  if ev.duplicate then
    duplicates = duplicates + 1
  else
    grp.applied = grp.applied + 1
    put(grp.day, ev.member, ev.value)
    if max_entries > 0 then
      put_trimmed(grp.week, grp.week_days, ev.member, ev.value, grp.week_w)
      if has_season then
        put_trimmed(grp.season, grp.season_days, ev.member, ev.value, grp.season_w)
      end
    else
      put(grp.week, ev.member, grp.week_w * ev.value)
      if has_season then put(grp.season, ev.member, grp.season_w * ev.value) end
    end
    if ev.event_id ~= '' then redis.call('ZADD', events, now, ev.event_id) end
    if ev.meta_text then
      if ev.meta_empty then
        redis.call('HDEL', meta, ev.member)
      else
        redis.call('HSET', meta, ev.member, ev.meta_text)
      end
    end
  end
end
for key, days in pairs(stale) do rebuild(key, days) end
for _, grp in ipairs(groups) do
  local has_season = grp.season_id ~= ''
  if grp.applied > 0 then
    applied = applied + grp.applied
    redis.call('EXPIREAT', grp.day, grp.day_exp)
    redis.call('EXPIREAT', grp.week, grp.week_exp)
    if has_season then redis.call('EXPIREAT', grp.season, grp.season_exp) end
    if max_entries > 0 then
      trim(grp.week)
      if has_season then trim(grp.season) end
    end
  end
end
if applied > 0 or duplicates > 0 then
  redis.call('ZREMRANGEBYSCORE', events, '-inf', '(' .. cutoff)
  if redis.call('EXISTS', events) == 1 then redis.call('EXPIREAT', events, events_expireat) end
end
-- Record the result; drop at most 100 expired batch ids per write (bounded work: each
-- write adds one, so the backlog shrinks), and keep both keys for 48 hours after the last.
local expired = redis.call('ZRANGEBYSCORE', batches, '-inf', '(' .. cutoff, 'LIMIT', 0, 100)
if #expired > 0 then
  redis.call('ZREM', batches, unpack(expired))
  redis.call('HDEL', batch_results, unpack(expired))
end
redis.call('ZADD', batches, now, batch_id)
redis.call('HSET', batch_results, batch_id, digest .. ' ' .. applied .. ' ' .. duplicates)
redis.call('EXPIREAT', batches, events_expireat)
redis.call('EXPIREAT', batch_results, events_expireat)
return {applied, duplicates}
