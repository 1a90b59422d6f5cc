#!lua flags=no-writes
-- A ranked slice of a board with metadata, gathered in one call: top/page, around a rank,
-- around a member. The script only reads and ranks; seasons/replies.py writes the JSON.
--
-- KEYS[1] live sorted set   KEYS[2] archive sorted set (read instead when it exists; the same
--         name as KEYS[1] for windows that have no archive)   KEYS[3] meta hash
-- KEYS[4] the board's moderation hash   KEYS[5] the twin of KEYS[1], hidden members' entries (a
--         snapshot, read from its archive alone, names it there: no twin)
-- ties = "earliest" only: KEYS[6] the reach set of KEYS[1]  KEYS[7] the reach set of KEYS[2]
--         KEYS[8] the reach set of KEYS[5]
-- ties = "dense" only: KEYS[6] the distinct set of KEYS[1]  KEYS[7] the distinct set of KEYS[2]
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared|dense|earliest)
-- ARGV[3] mode (page|rank|member)
-- ARGV[4] page: offset; rank: 1-based centre rank; member: the member
-- ARGV[5] page: limit; rank and member: size
-- ARGV[6] the size a trimmed board keeps (max_entries; 0: untrimmed), for a self-view
-- Returns the fields {'total', n, 'start', the 0-based position of the first row, 'first', the
-- rank of the first row, 'rows', {member, score, ...} in rank order (Redis's text of each
-- score), 'metas', the metadata JSON of each member (nil: none)}; in mode member, nil (a nil
-- reply) when the member is not on the board. The ranks after the first follow from the tie
-- rule and the scores (seasons/replies.py); the rule's ranks are lib/ranks.lua's tie_*.
-- Around a hidden or banned member not on the live key (lib/hidden.lua): the page of the board
-- with it standing there, and in open mode one more field, 'hidden', its row (1-based).

--! include ranks
--! include hidden

if #ARGV ~= 6 then error('read_range.lua: ARGV: must be 6 arguments, got ' .. #ARGV, 0) end
-- `reach`: the reach set (earliest) or the distinct set (dense) of the board read.
local key, reach = KEYS[1], KEYS[6]
if KEYS[2] ~= KEYS[1] and redis.call('EXISTS', KEYS[2]) == 1 then
  key, reach = KEYS[2], KEYS[7]
end
local desc = ARGV[1] == 'desc'
local ties = ARGV[2]
local mode = ARGV[3]
local total = redis.call('ZCARD', key)

local start, count
if mode == 'page' then
  start, count = tonumber(ARGV[4]), tonumber(ARGV[5])
else
  local size = tonumber(ARGV[5])
  local centre
  if mode == 'rank' then
    centre = tonumber(ARGV[4]) - 1
  else
    centre = tie_position(ties, key, reach, desc, ARGV[4])
    if not centre then
      -- A hidden or banned member missing from the live key: the page around where it
      -- stands, or nil (lib/hidden.lua).
      local m, cap = ARGV[4], tonumber(ARGV[6])
      local state = key == KEYS[1] and KEYS[5] ~= key and redis.call('HGET', KEYS[4], m)
      if not state then return false end
      state = hidden().mode(state)
      local side = tie_beside(ties, key, reach)
      local rank, score, where = hidden().view(ties, key, side, KEYS[5], KEYS[8], desc, cap,
        m, true)
      if not rank then return false end
      local all = hidden().total(key, cap)
      start = math.max(0, math.min(where - math.floor(size / 2), all - size))
      -- The page holds the member and the public rows from `start` on, as many as fit.
      count = math.min(size, all - start) - 1
      local rows, first = {}, rank
      if count > 0 then
        if desc then
          rows = redis.call('ZRANGE', key, start, start + count - 1, 'REV', 'WITHSCORES')
        else
          rows = redis.call('ZRANGE', key, start, start + count - 1, 'WITHSCORES')
        end
        local after = tie_page(ties, key, reach, desc, rows, start)
        if where > start then first = after end
      end
      local at = where - start + 1
      table.insert(rows, 2 * at - 1, m)
      table.insert(rows, 2 * at, score)
      local members = {}
      for i = 1, #rows, 2 do members[#members + 1] = rows[i] end
      local out = {'total', all, 'start', start, 'first', first, 'rows', rows,
        'metas', redis.call('HMGET', KEYS[3], unpack(members))}
      if state == 'open' then
        out[#out + 1], out[#out + 2] = 'hidden', at
      end
      return out
    end
  end
  -- Centred on the rank, shifted at either end so that it still holds `size` entries.
  start = math.max(0, math.min(centre - math.floor(size / 2), total - size))
  count = size
end
if count <= 0 or start >= total then
  return {'total', total, 'start', start, 'first', start + 1, 'rows', {}, 'metas', {}}
end

local rows
if desc then
  rows = redis.call('ZRANGE', key, start, start + count - 1, 'REV', 'WITHSCORES')
else
  rows = redis.call('ZRANGE', key, start, start + count - 1, 'WITHSCORES')
end
-- The rows in the rule's order, and the first one's rank.
local first = tie_page(ties, key, reach, desc, rows, start)
local members = {}
for i = 1, #rows, 2 do members[#members + 1] = rows[i] end
return {'total', total, 'start', start, 'first', first, 'rows', rows,
  'metas', redis.call('HMGET', KEYS[3], unpack(members))}
