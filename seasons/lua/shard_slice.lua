#!lua flags=no-writes
-- A slice of one shard of a sharded board with ties = "earliest", in the earliest order, with
-- the reach time of each entry: what a page of the board merges over its shards
-- (seasons/shard_reads.py), ordering equal scores of several shards by those times. A board
-- of the other rules is sliced with ZRANGE. The script only reads.
--
-- KEYS[1] a sorted set: one shard's key of a board's period
-- KEYS[2] its reach set
-- ARGV[1] order (desc|asc)
-- ARGV[2] from: the slice's first position (0-based) in the earliest order
-- ARGV[3] count: at most this many entries
-- Returns {rows, times}: rows, {member, score, ...}; times, Redis's text of each one's reach
-- time (false: none).

--! include ranks

if #ARGV ~= 3 or #KEYS ~= 2 then
  error('shard_slice.lua: KEYS: key, reach set; ARGV: order, from, count; got '
    .. #KEYS .. ' and ' .. #ARGV, 0)
end
local from, count = tonumber(ARGV[2]), tonumber(ARGV[3])
if not from or not count or from < 0 then
  error('shard_slice.lua: ARGV[2], ARGV[3]: from >= 0 and count, got ' .. ARGV[2] .. ', '
    .. ARGV[3], 0)
end
local members, scores, times = earliest().slice(KEYS[1], KEYS[2], ARGV[1] == 'desc', from, count)
local rows = {}
for k = 1, #members do
  rows[2 * k - 1], rows[2 * k] = members[k], scores[k]
end
return {rows, times}
