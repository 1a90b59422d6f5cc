#!lua flags=no-writes
-- Members' places on boards, in one call, answered as the JSON of the result:
--   entry    one member on one board: {"rank","member","score","metadata"}, or nil (a nil
--            reply) when the member is not on the board;
--   entries  many members on one board (a friends lookup): a JSON array of the entries of
--            the ranked ones, best first (ties in the order asked);
--   history  one member on many boards (its last periods):
--            {"board","window","member","history":[{"period","rank","score"}]}, rank and score
--            null in a period where it is not ranked.
--
-- KEYS[1] meta hash
-- KEYS[2..] pairs of (live sorted set, archive sorted set); the archive is read when it exists
-- ARGV[1] order (desc|asc)  ARGV[2] ties (member|shared)  ARGV[3] shape (entry|entries|history)
-- entry, entries: ARGV[4..] the members, on the board of the first pair
-- history: ARGV[4] board  ARGV[5] window  ARGV[6] member  ARGV[7..] the period id of each pair

--! include json

local desc = ARGV[1] == 'desc'
local shared = ARGV[2] == 'shared'
local shape = ARGV[3]

local function board(pair)
  local live, archive = KEYS[2 * pair], KEYS[2 * pair + 1]
  if archive ~= live and redis.call('EXISTS', archive) == 1 then return archive end
  return live
end

-- The 1-based rank and the score of `m` on `key`, or nil when it is not there.
local function place(key, m)
  local score = redis.call('ZSCORE', key, m)
  if not score then return nil end
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
  return rank, score
end

local function entry(rank, m, score)
  return json_entry(rank, m, score, redis.call('HGET', KEYS[1], m))
end

if shape == 'entry' then
  local rank, score = place(board(1), ARGV[4])
  if not rank then return false end
  return entry(rank, ARGV[4], score)
end

if shape == 'entries' then
  local key, found = board(1), {}
  for i = 4, #ARGV do
    local rank, score = place(key, ARGV[i])
    if rank then found[#found + 1] = {rank, ARGV[i], score, i} end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[4] < b[4]
  end)
  local out = {}
  for i = 1, #found do out[i] = entry(found[i][1], found[i][2], found[i][3]) end
  return '[' .. table.concat(out, ',') .. ']'
end

-- history
local m, out = ARGV[6], {}
for i = 7, #ARGV do
  local rank, score = place(board(i - 6), m)
  if rank then
    out[#out + 1] = '{"period":' .. json_string(ARGV[i]) .. ',"rank":' .. rank .. ',"score":'
      .. score .. '}'
  else
    out[#out + 1] = '{"period":' .. json_string(ARGV[i]) .. ',"rank":null,"score":null}'
  end
end
return '{"board":' .. json_string(ARGV[4]) .. ',"window":' .. json_string(ARGV[5])
  .. ',"member":' .. json_string(m) .. ',"history":[' .. table.concat(out, ',') .. ']}'
