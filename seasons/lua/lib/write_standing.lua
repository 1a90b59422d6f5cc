-- write_standing: where each event's member stands after a write, when the batch asks
-- (`standing` in write.lua's header): write_standings(batch) reads it on the board the batch's
-- check chose for each group (group.standing, lib/write_batch.lua). Apart because it is a
-- read inside the write, by the reads' own rules (lib/ranks.lua, lib/hidden.lua). Reads the
-- events' columns by lib/write_batch.lua's numbers (GROUP, MEMBER), included before it.

--! include bulk
--! include ranks
--! include hidden

-- With `standing`: where each event's member stands now on its group's board of that
-- window, as {rank, score, ...} in batch order (false, false: not there), then the 1-based
-- events whose standing is an open self-view. Each board is read once per member: one
-- ZMSCORE of its members, then the rank of each by the board's tie rule (lib/ranks.lua),
-- once per score where the rule ranks by score alone. A member missing from its board may be
-- hidden or banned: the members missing anywhere have their moderation fields read (one
-- HMGET; none when every member is found), and such a member answers its self-view
-- (lib/hidden.lua, the reads' definition), from the twin board. nil when one needs the twins
-- and the call has none: only on a resend, since a call that applies events has asked for
-- them before writing (write.lua's moderation lookup).
local function write_standings(batch)
  local groups, all, desc = batch.groups, batch.events, batch.desc
  local out = {}
  local boards, order = {}, {}  -- key -> {standing, members, seen}; keys in first use
  for i = 1, #all do
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
    local fields = values_of('HMGET', batch.keys.moderation, missed)
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
  for i = 1, #all do
    local s = groups[all[i][GROUP] + 1].standing
    local p = s and placed[s[1]][all[i][MEMBER]]
    out[2 * i - 1], out[2 * i] = p and p[1] or false, p and p[2] or false
    if p and p[3] then flagged[#flagged + 1] = i end
  end
  for _, i in ipairs(flagged) do out[#out + 1] = i end
  return out
end
