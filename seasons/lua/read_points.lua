#!lua flags=no-writes
-- Rank, score and metadata of members on boards, in one call: a member's rank, a friends
-- lookup (many members, one board), a member's history (one member, many periods).
--
-- KEYS[1] meta hash
-- KEYS[2..] pairs of (live sorted set, archive sorted set); the archive is read when it exists
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared)  ARGV[3] with metadata (1|0)
-- ARGV[4..] pairs of (1-based pair number in KEYS, member)
-- Returns a JSON array with one item per requested point: {"rank","member","score","metadata"}
-- (metadata {} when not asked for), or null where the member is not on that board.

local desc = ARGV[1] == 'desc'
local shared = ARGV[2] == 'shared'
local with_meta = ARGV[3] == '1'
local boards = {}
for i = 2, #KEYS, 2 do
  local key = KEYS[i]
  if KEYS[i + 1] ~= key and redis.call('EXISTS', KEYS[i + 1]) == 1 then key = KEYS[i + 1] end
  boards[#boards + 1] = key
end

local out = {}
for i = 4, #ARGV, 2 do
  local key = boards[tonumber(ARGV[i])]
  local m = ARGV[i + 1]
  local score = redis.call('ZSCORE', key, m)
  if score then
    local rank
    if shared then
      -- Standard competition ranking: 1 + members with a strictly better score.
      if desc then
        rank = 1 + redis.call('ZCOUNT', key, '(' .. score, '+inf')
      else
        rank = 1 + redis.call('ZCOUNT', key, '-inf', '(' .. score)
      end
    elseif desc then
      rank = 1 + redis.call('ZREVRANK', key, m)
    else
      rank = 1 + redis.call('ZRANK', key, m)
    end
    local meta = with_meta and redis.call('HGET', KEYS[1], m) or false
    out[#out + 1] = '{"rank":' .. rank .. ',"member":' .. cjson.encode(m) .. ',"score":'
      .. score .. ',"metadata":' .. (meta or '{}') .. '}'
  else
    out[#out + 1] = 'null'
  end
end
return '[' .. table.concat(out, ',') .. ']'
