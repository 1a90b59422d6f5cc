#!lua flags=no-writes
-- A ranked slice of a board with metadata, in one call: top/page, around a rank, around a member.
-- The reply is the page's JSON, ready for the HTTP API and for Page.model_validate_json.
--
-- KEYS[1] live sorted set   KEYS[2] archive sorted set (read instead when it exists; the same
--         name as KEYS[1] for windows that have no archive)   KEYS[3] meta hash
-- ties = "earliest" only: KEYS[4] the reach set of KEYS[1]  KEYS[5] the reach set of KEYS[2]
-- ties = "dense" only: KEYS[4] the distinct set of KEYS[1]  KEYS[5] the distinct set of KEYS[2]
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared|dense|earliest)
-- ARGV[3] mode (page|rank|member)
-- ARGV[4] page: offset; rank: 1-based centre rank; member: the member
-- ARGV[5] page: limit; rank and member: size
-- ARGV[6] board  ARGV[7] window  ARGV[8] period id (copied into the reply)
-- ARGV[9] the board's composite layout (lib/json.lua parts_layout), or '' for none
-- Returns {"board","window","period","total","entries":[{"rank","member","score","parts"?,
-- "metadata"}]} (scores as lib/json.lua json_score writes them; "parts" on a board with a
-- composite layout); in mode member, nil (a nil reply) when the member is not on the board.

--! include json
--! include ranks

-- `reach`: the reach set (earliest) or the distinct set (dense) of the board read.
local key, reach = KEYS[1], KEYS[4]
if KEYS[2] ~= KEYS[1] and redis.call('EXISTS', KEYS[2]) == 1 then
  key, reach = KEYS[2], KEYS[5]
end
local desc = ARGV[1] == 'desc'
local shared = ARGV[2] == 'shared'
local dense = ARGV[2] == 'dense'
local earliest = ARGV[2] == 'earliest'
local mode = ARGV[3]
if #ARGV ~= 9 then error('read_range.lua: ARGV: must be 9 arguments, got ' .. #ARGV, 0) end
local layout = parts_layout(ARGV[9], 'read_range.lua: ARGV[9]')
local total = redis.call('ZCARD', key)

local entries = {}

-- The page: its header, then the entries joined once.
local function reply()
  return '{"board":' .. json_string(ARGV[6]) .. ',"window":' .. json_string(ARGV[7])
    .. ',"period":' .. json_string(ARGV[8]) .. ',"total":' .. total .. ',"entries":['
    .. table.concat(entries, ',') .. ']}'
end

local start, count
if mode == 'page' then
  start, count = tonumber(ARGV[4]), tonumber(ARGV[5])
else
  local size = tonumber(ARGV[5])
  local centre
  if mode == 'rank' then
    centre = tonumber(ARGV[4]) - 1
  elseif earliest then
    local score = redis.call('ZSCORE', key, ARGV[4])
    if score then centre = earliest_rank(key, reach, desc, ARGV[4], score) - 1 end
  elseif desc then
    centre = redis.call('ZREVRANK', key, ARGV[4])
  else
    centre = redis.call('ZRANK', key, ARGV[4])
  end
  if not centre then return false end
  -- Centred on the rank, shifted at either end so that it still holds `size` entries.
  start = math.max(0, math.min(centre - math.floor(size / 2), total - size))
  count = size
end
if count <= 0 or start >= total then return reply() end

local rows
if desc then
  rows = redis.call('ZRANGE', key, start, start + count - 1, 'REV', 'WITHSCORES')
else
  rows = redis.call('ZRANGE', key, start, start + count - 1, 'WITHSCORES')
end
local members = {}
if earliest then
  -- Ranks are positions in the earliest order (lib/ranks.lua).
  local scores
  members, scores = earliest_page(key, reach, desc, rows, start)
  local metas = redis.call('HMGET', KEYS[3], unpack(members))
  for i = 1, #members do
    entries[i] = json_entry(start + i, members[i], scores[i], metas[i], layout)
  end
  return reply()
end
for i = 1, #rows, 2 do members[#members + 1] = rows[i] end
local metas = redis.call('HMGET', KEYS[3], unpack(members))

local rank = start + 1
if shared then
  -- Standard competition ranking: 1 + members with a strictly better score; an equal score
  -- shares the rank before it, a new score starts at its own position.
  if desc then
    rank = 1 + redis.call('ZCOUNT', key, '(' .. rows[2], '+inf')
  else
    rank = 1 + redis.call('ZCOUNT', key, '-inf', '(' .. rows[2])
  end
elseif dense then
  -- Dense ranking: the first entry's rank is counted on the distinct set (lib/ranks.lua);
  -- each new score after it is the next rank.
  rank = dense_rank(key, distinct_set(key, reach), desc, rows[2])
end

for i = 1, #members do
  local member, score = members[i], rows[2 * i]
  if i > 1 then
    -- Compared as numbers: Redis writes -0 and 0 apart, one score all the same.
    local same = tonumber(score) == tonumber(rows[2 * i - 2])
    if dense then
      if not same then rank = rank + 1 end
    elseif not (shared and same) then
      rank = start + i
    end
  end
  entries[i] = json_entry(rank, member, score, metas[i], layout)
end
return reply()
