-- apply: pass 2 of write.lua, each accepted event written to its group's boards by the
-- board's aggregate and tie rule: put (ZINCRBY, ZADD GT/LT), put_trimmed (a board keeping
-- max_entries members), put_distinct (a board with a distinct set), reach (a reach set), then
-- what the batch leaves to its end: the distinct sets' upkeep, the rebuild of trimmed boards
-- a member fell on, the trims and the EXPIREATs. Apart because it is the only part that
-- changes the boards: the rest of the write decides which events come here.
--
-- new_board_writer(batch, duplicate) reads the scores the distinct sets are kept with (the
-- batch's members on those boards, the `duplicate` events of pass 1 left out) and answers
-- the writer:
--   apply(grp, member, value, ts)  one event to `grp`, its group (the twin for a hidden member)
--   settle()                       the batch's end (above); answers the events applied
-- `batch` is the checked batch (lib/write_batch.lua; its events read by the column numbers
-- GROUP and MEMBER).

--! include aggregate
--! include trim
--! include bulk

local function new_board_writer(batch, duplicate)
  local aggregate, desc, max_entries = batch.aggregate, batch.desc, batch.max_entries
  local groups, all = batch.groups, batch.events

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
    for i = 1, #all do
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

  local writer = {}

  function writer.apply(grp, member, value, ts)
    grp.applied = grp.applied + 1
    local changed = true
    if grp.reached then
      local old = score_of(grp.key, member)
      put(grp.key, member, value)
      changed = old == nil or score_of(grp.key, member) ~= old
      reach(grp.reached, member, old, value, ts, changed)
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
        reach(r.reached, member, score_of(r.key, member), x, ts, changed)
        put(r.key, member, x)
      elseif r.distinct then
        put_distinct(r.key, r.distinct, member, r.weight * value)
      else
        put(r.key, member, r.weight * value)
      end
    end
  end

  function writer.settle()
    flush_distinct()  -- before the rebuilds and trims below, which read the distinct sets
    for key, found in pairs(stale) do
      aggregate_store(key, found[1], aggregate, batch.keys.scratch)
      if found[2] then distinct_rebuild(key, found[2]) end
    end
    local applied = 0
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
    return applied
  end

  for _, grp in ipairs(groups) do
    grp.applied = 0
    if grp.twin then grp.twin.applied = 0 end
  end
  prefetch_scores()
  return writer
end
