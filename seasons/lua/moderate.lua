-- Set one member's moderation state on ONE board, atomically (seasons/moderation.py,
-- docs/fair-play.md): its record in the moderation hash, and its entries moved between the
-- board's public keys and their twins (Keys.hidden) when it stops or starts being visible.
--
-- KEYS[1]  the board's moderation hash (member -> JSON of its state)
-- KEYS[2]  the board's state hash (the day each base is folded through)
-- KEYS[3]  scratch: where a set board's rebuild builds its union (deleted after)
-- KEYS[4]  the board's pending follow-ups (call id -> JSON: Keys.moderation_pending)
-- KEYS[5..] every key ARGV[3] names: the live public keys of the board (window keys, bases,
--          reach sets), their twins, the distinct sets of the window keys, and the days and
--          bases of trimmed rolled-up boards
-- ARGV[1]  the member
-- ARGV[2]  its new record, JSON {"state": "hidden" | "banned", "mode", "reason", "at",
--          "actor"}, or '' (visible: no record)
-- ARGV[3]  the board, JSON {aggregate, order, max_entries, pairs}: pairs, one per public
--          key, [key, twin, distinct or null, rolled or null]; rolled (a rolled-up window of
--          a board with max_entries > 0): {days: [[day key, weight, day], ...], base: null
--          or {key, through}} as write.lua's rollups name them (what the board is rebuilt
--          from, and a member trimmed away gets its score from)
-- ARGV[4]  the call, JSON {"call", "member", "at", "actor", "reason", "request_id"}: with a
--          change, recorded in KEYS[4] under its call id as {"call": ARGV[4], "before": the
--          old record or null, "after": ARGV[2]'s or null}, so that the follow-ups (events,
--          audit entry, amendment) survive a crash of the caller; the caller deletes it when
--          they are done
-- Hiding (visible -> hidden or banned): each public key holding the member loses it and its
-- twin gets it with the same score (and the key's PEXPIRETIME); a distinct set loses the
-- score when no member has it any more; a trimmed board that was full and held the member is
-- rebuilt from its days and trimmed again (a member trimmed away may belong now); on a
-- trimmed board a member trimmed away gets its exact score on the twin from the days.
-- Unhiding: the reverse; distinct sets get the score back; trimmed boards are trimmed.
-- hidden <-> banned, or another mode or reason: the record only.
-- Returns {'same', record or false, others} (nothing to change: the same state, mode and
-- reason) or {'changed', the old record or false, how many keys the member moved between,
-- others}; others: how many pending follow-ups of other calls the board holds.

--! include aggregate
--! include trim

local moderation, state, scratch, pending = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member, record = ARGV[1], ARGV[2]
local board = cjson.decode(ARGV[3])
local null = cjson.null
local declared = {}
for i = 1, #KEYS do declared[KEYS[i]] = true end
local function key(k)
  if k == null or k == nil then return nil end
  if not declared[k] then error('moderate.lua: ' .. k .. ' is not declared in KEYS', 0) end
  return k
end

local aggregate, desc = board.aggregate, board.order == 'desc'
local max_entries = board.max_entries
local pairs_ = {}
for i, p in ipairs(board.pairs) do
  local rolled = p[4] ~= null and p[4] or nil
  local entry = {key = key(p[1]), twin = key(p[2]), distinct = key(p[3])}
  if rolled and max_entries > 0 then
    local days = {}
    for _, d in ipairs(rolled.days) do days[#days + 1] = {key(d[1]), d[2], d[3]} end
    if rolled.base ~= null and rolled.base ~= nil then
      -- As write.lua: the base, then the days after the last one folded into it.
      local through = redis.call('HGET', state, rolled.base.through)
      local from = {{key(rolled.base.key), 1}}
      for _, d in ipairs(days) do
        if not through or d[3] > through then from[#from + 1] = d end
      end
      days = from
    end
    entry.days = days
  end
  pairs_[i] = entry
end

local old = redis.call('HGET', moderation, member)
local was = old and cjson.decode(old) or nil
local will = record ~= '' and cjson.decode(record) or nil
if not was and not will then return {'same', false, redis.call('HLEN', pending)} end
if was and will and was.state == will.state and was.mode == will.mode
    and was.reason == will.reason then
  return {'same', old, redis.call('HLEN', pending)}
end

-- `member` with score `s` (Redis's text, or a number) into `dest`, out of `src`; `dest` gets
-- `src`'s expiry, when `src` has one.
local function move(src, dest, s)
  local at = redis.call('PEXPIRETIME', src)
  redis.call('ZADD', dest, s, member)
  redis.call('ZREM', src, member)
  if at > 0 then redis.call('PEXPIREAT', dest, at) end
end

local function hide()
  local moved = 0
  -- First every exact score on the trimmed boards, while the days still hold the member.
  local before = {}
  for i, p in ipairs(pairs_) do
    local s = redis.call('ZSCORE', p.key, member)
    if s then
      before[i] = {s, true, p.days and redis.call('ZCARD', p.key) >= max_entries}
    elseif p.days then
      local total = aggregate_days(aggregate, p.days, member)
      if total then before[i] = {total, false, false} end
    end
  end
  local rebuild = {}
  for i, p in ipairs(pairs_) do
    local b = before[i]
    if b then
      move(p.key, p.twin, b[1])
      moved = moved + 1
      if b[2] and p.distinct then
        if redis.call('ZCOUNT', p.key, b[1], b[1]) == 0 then
          redis.call('ZREM', p.distinct, distinct_text(b[1]))
        end
      end
      if b[3] then rebuild[#rebuild + 1] = p end
    end
  end
  -- After every move: the days no longer hold the member.
  for _, p in ipairs(rebuild) do
    local at = redis.call('PEXPIRETIME', p.key)
    aggregate_store(p.key, p.days, aggregate, scratch)
    if at > 0 then redis.call('PEXPIREAT', p.key, at) end
    if p.distinct then
      local dat = redis.call('PEXPIRETIME', p.distinct)
      distinct_rebuild(p.key, p.distinct)
      if dat > 0 then redis.call('PEXPIREAT', p.distinct, dat) end
    end
    trim_board(p.key, desc, max_entries, p.distinct)
  end
  return moved
end

local function unhide()
  local moved = 0
  for _, p in ipairs(pairs_) do
    local s = redis.call('ZSCORE', p.twin, member)
    if s then
      local had = redis.call('PEXPIRETIME', p.key)
      move(p.twin, p.key, s)
      -- A public key that existed keeps its own expiry (the twin's is the same).
      if had > 0 then redis.call('PEXPIREAT', p.key, had) end
      moved = moved + 1
      if p.distinct then
        local text = distinct_text(s)
        redis.call('ZADD', p.distinct, text, text)
        local at = redis.call('PEXPIRETIME', p.key)
        if at > 0 then redis.call('PEXPIREAT', p.distinct, at) end
      end
      if p.days then trim_board(p.key, desc, max_entries, p.distinct) end
    end
  end
  return moved
end

local moved = 0
if was == nil then
  moved = hide()
elseif will == nil then
  moved = unhide()
end
if will then
  redis.call('HSET', moderation, member, record)
else
  redis.call('HDEL', moderation, member)
end
redis.call('DEL', scratch)
local others = redis.call('HLEN', pending)
-- One object of the three texts as they are (cjson's encoder would rewrite their
-- numbers and '/': lib/json.lua): the call's, the record before (null: visible) and after.
redis.call('HSET', pending, cjson.decode(ARGV[4]).call, '{"call":' .. ARGV[4] .. ',"before":'
  .. (old or 'null') .. ',"after":' .. (will and record or 'null') .. '}')
return {'changed', old or false, moved, others}
