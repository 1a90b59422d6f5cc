-- hidden: the self-views of a hidden or banned member (docs/boards.md#hidden-and-banned-members).
--
-- A member hidden or banned on a board has a field in the board's moderation hash
-- (seasons/keys.py `moderation`: member -> JSON {"state", "mode", ...}) and no entry on the
-- board's public keys: its entries live on their twins (`twin_of`), so every public read is
-- the board of the visible members, read as it always was. A read addressed to the member
-- (its entry, around it, its history, its climb, a lookup naming it, a write's standing of
-- it) that misses it on a live public key reads its moderation field then, and only then: a
-- visible member's read never does. It answers where the member would stand if it alone were made visible: its score on the
-- twin of the key read, placed among the public entries by the board's tie rule, so its
-- rank is 1 + the visible members strictly better (member: a better score, or an equal one
-- first in Redis's order of member bytes, reversed on a desc board; shared: a better score;
-- dense: a better distinct score; earliest: a better score, or an equal one reached earlier,
-- then member bytes). On a trimmed board (max_entries, the "cap") it stands there only
-- within the cap, the last member making room. An archive is the public board alone: a read
-- that finds one reads no twin.
--
-- The scripts (read_points.lua, read_range.lua, write.lua) read the moderation field
-- themselves (HGET, HMGET); the functions here are made by the first self-view of a call
-- (hidden()), as lib/ranks.lua's earliest ones: the reads of visible members, and of members
-- missing and not hidden, build none of them.

--! include ranks
--! include position

local function make_hidden()
  -- 'shadow' or 'open' from a member's field of the moderation hash (a hidden or a banned
  -- member: both have a self-view), its stored JSON; shadow unless it says open.
  local function mode(value)
    local ok, state = pcall(cjson.decode, value)
    if ok and type(state) == 'table' and state.mode == 'open' then return 'open' end
    return 'shadow'
  end

  -- Where `m`, not on `key` (read with `side`, as tie_beside answers it), stands with `score`
  -- (reached at `t`: earliest) as the only other member: its rank and its 0-based position
  -- in the order of a page (nil on a shared or dense board unless `positioned` or a cap
  -- needs it); nil when a trimmed board of `cap` members (0: untrimmed) has no room for it.
  local function place(ties, key, side, desc, cap, m, score, t, positioned)
    local position
    if ties == 'earliest' then
      position = earliest().insert(key, side, desc, m, score, t, bytes_less)
    elseif ties == 'member' or positioned or cap > 0 then
      position = redis_position(key, desc, m, score)
    end
    if cap > 0 and position >= cap then return nil end
    local rank
    if ties == 'shared' then
      rank = 1 + count_better(key, desc, score)
    elseif ties == 'dense' then
      rank = dense_rank(key, side, desc, score)
    else
      rank = position + 1
    end
    return rank, position
  end

  -- The self-view of `m` whose mode is known: its rank, its score on `twin` (the twin of
  -- `key`; its reach set `twin_reach` on an earliest board) and its position as `place`
  -- answers them; nil when it is not on the twin or has no room.
  local function view(ties, key, side, twin, twin_reach, desc, cap, m, positioned)
    local score = redis.call('ZSCORE', twin, m)
    if not score then return nil end
    local t
    if ties == 'earliest' then
      t = tonumber(redis.call('ZSCORE', twin_reach, m)) or math.huge
    end
    local rank, position = place(ties, key, side, desc, cap, m, score, t, positioned)
    if not rank then return nil end
    return rank, score, position
  end

  -- The members of `key` with `m` standing there (`view`): how many, with a cap.
  local function total(key, cap)
    local n = redis.call('ZCARD', key) + 1
    if cap > 0 and n > cap then return cap end
    return n
  end

  -- The members of `key` strictly worse than `score` once `m` stands there: on a full
  -- trimmed board, the last member makes room, and is no longer counted if it was worse.
  local function worse(key, desc, cap, score, counted)
    if cap == 0 or redis.call('ZCARD', key) < cap then return counted end
    local last
    if desc then
      last = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
    else
      last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
    end
    local x, s = tonumber(last), tonumber(score)
    if (desc and x < s) or (not desc and x > s) then return counted - 1 end
    return counted
  end

  return {mode = mode, view = view, total = total, worse = worse}
end

local hidden_fns = nil
local function hidden()
  if not hidden_fns then hidden_fns = make_hidden() end
  return hidden_fns
end
