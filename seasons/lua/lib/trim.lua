-- trim: keep the `max_entries` best members of the sorted set `key` in the board's order
-- (`desc`: the highest scores first) and remove the rest; a set no longer than that is left
-- as it is. `dist` (a board with ties = "dense", else nil): the board's distinct set, which
-- loses every score strictly beyond the worst one kept (a member cut at that score leaves
-- it held by the members kept).
local function trim_board(key, desc, max_entries, dist)
  if desc then
    redis.call('ZREMRANGEBYRANK', key, 0, -(max_entries + 1))
  else
    redis.call('ZREMRANGEBYRANK', key, max_entries, -1)
  end
  if not dist then return end
  local worst
  if desc then
    worst = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
    if worst then redis.call('ZREMRANGEBYSCORE', dist, '-inf', '(' .. worst) end
  else
    worst = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
    if worst then redis.call('ZREMRANGEBYSCORE', dist, '(' .. worst, '+inf') end
  end
  if not worst then redis.call('DEL', dist) end
end

-- Distinct sets (ties = "dense"): beside a board, one member per distinct score of it, the
-- score's text as Redis writes it (what ZSCORE answers), scored by it (lib/ranks.lua reads
-- them).

local DISTINCT_CHUNK = 1000 -- board entries read per ZRANGE (and distinct scores per ZADD)

-- The member of score text `s` in a distinct set. A board may hold both -0 and 0 (a weight
-- of 0 times a negative value is -0), which Redis writes "-0" and "0" but counts as one
-- score: both are "0" here, so that each score has one member.
local function distinct_text(s)
  if s == '-0' then return '0' end
  return s
end

-- Rebuild `dist` from the board `key`, read in chunks; no TTL (the caller gives it its
-- board's). An empty board leaves no distinct set.
local function distinct_rebuild(key, dist)
  redis.call('DEL', dist)
  local from, last = 0, nil
  while true do
    local rows = redis.call('ZRANGE', key, from, from + DISTINCT_CHUNK - 1, 'WITHSCORES')
    local add = {}
    for i = 2, #rows, 2 do
      -- Redis writes a score in one way only (but -0, made "0" here), so equal texts are
      -- equal scores; in board order equal scores are next to each other.
      local s = distinct_text(rows[i])
      if s ~= last then
        add[#add + 1] = s
        add[#add + 1] = s
        last = s
      end
    end
    if #add > 0 then redis.call('ZADD', dist, unpack(add)) end
    if #rows < 2 * DISTINCT_CHUNK then return end
    from = from + DISTINCT_CHUNK
  end
end

-- After the score of `member` on `key` may have changed from `old` (Redis's text of it, or
-- nil/false when it had none): its new score is in `dist`, and `old` leaves `dist` when no
-- member has it any more.
local function distinct_settle(key, dist, member, old)
  local new = redis.call('ZSCORE', key, member)
  if new then
    new = distinct_text(new)
    redis.call('ZADD', dist, new, new)
  end
  if old then old = distinct_text(old) end
  if old and old ~= new and redis.call('ZCOUNT', key, old, old) == 0 then
    redis.call('ZREM', dist, old)
  end
end

-- `dist` made exact where it may hold scores no member of `key` has any more (a sliced
-- repair, which adds every score it writes): each such score is removed. Returns how many.
local function distinct_prune(key, dist)
  local cursor, removed = '0', 0
  repeat
    local got = redis.call('ZSCAN', dist, cursor, 'COUNT', DISTINCT_CHUNK)
    cursor = got[1]
    local items = got[2]
    for i = 1, #items, 2 do
      local s = items[i]
      if redis.call('ZCOUNT', key, s, s) == 0 then
        redis.call('ZREM', dist, s)
        removed = removed + 1
      end
    end
  until cursor == '0'
  return removed
end
