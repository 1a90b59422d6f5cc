-- limits: the per-member limits of a board (docs/writes.md#held-events), which hold an event
-- instead of applying it: member_rate (a counter per member of the events accepted in the
-- interval holding `now`) and max_period_gain (a sum board's score of the member on the
-- group's board of a window, which an event may not take above the limit). Apart from the
-- write's flow because it is the one part that reads ahead of pass 1 (counters, scores) to
-- decide, event by event, what pass 1 then skips.
--
-- new_holding(batch, home, duplicate, held_as) reads what the decisions need (the counters,
-- and the scores of the members that could pass a gain limit) and answers the holder:
--   decide(i)         in pass 1, for the i-th event when it is not a duplicate: sets
--                     held_as[i] = {reason, score before (or false), window, limit} when it is
--                     held; one that is not is counted as accepted
--   write_counters()  the counters as pass 1 left them, before pass 2
-- `batch` is the checked batch (lib/write_batch.lua; its events read by the column numbers
-- MEMBER, VALUE, GROUP), `home(i)` the group whose keys hold the i-th event's member (its
-- twin for a hidden one), `duplicate` and `held_as` write.lua's i -> true / record of pass 1,
-- read for the events before i (their score on the day board).

--! include aggregate
--! include bulk

local function new_holding(batch, home, duplicate, held_as)
  local all, n, groups, limits = batch.events, #batch.events, batch.groups, batch.limits
  local aggregate, desc, max_entries = batch.aggregate, batch.desc, batch.max_entries
  local rate, gain = limits.rate, limits.gain
  local counts, members = {}, {}  -- member -> accepted events in the interval; the members
  local rate_events = rate and rate.events
  local gain_scores = {}  -- board key -> member -> its score as the batch leaves it so far
  local gaining = false  -- whether gain_scores holds any member (one that could pass)
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

  local holder = {}
  function holder.decide(i)
    local member = all[i][MEMBER]
    local count = counts[member]
    if gaining or (count and count >= rate_events) then
      held_as[i] = hold(i, home(i))
    elseif count then
      counts[member] = count + 1  -- what hold() finds: no limit reached, the event counted
    end
  end

  -- Written first in the write: their fields are fresh from the read that found them.
  function holder.write_counters()
    if not rate then return end
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

  return holder
end
