#!lua flags=no-writes
-- Rank, score and metadata of members on boards, in one call: a member's rank, a friends
-- lookup (many members, one board), a member's history (one member, many periods).
--
-- KEYS[1] meta hash
-- KEYS[2..] pairs of (live sorted set, archive sorted set); the archive is read when it exists
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared)
-- ARGV[3..] pairs of (1-based pair number in KEYS, member)
-- Returns {rank, score, meta, ...} per requested point: rank -1, score '' and meta false when
-- the member is not on that board; meta is the member's JSON or false.

local desc = ARGV[1] == 'desc'
local shared = ARGV[2] == 'shared'
local boards = {}
for i = 2, #KEYS, 2 do
  local key = KEYS[i]
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then key = KEYS[i + 1] end
  boards[#boards + 1] = key
end

local out = {}
for i = 3, #ARGV, 2 do
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
    out[#out + 1] = rank
    out[#out + 1] = score
    out[#out + 1] = redis.call('HGET', KEYS[1], m)
  else
    out[#out + 1] = -1
    out[#out + 1] = ''
    out[#out + 1] = false
  end
end
return out
