-- Erase one member from a board: from each given sorted set and from the metadata hash, and
-- (ties = "dense") its score from a board's distinct set when no member has that score any
-- more, in the same atomic step: a write between a read of its score and its removal could
-- otherwise leave a score in a distinct set that no member has.
--
-- KEYS[1] meta hash   KEYS[2..] sorted sets of the board (live, archived, scratch, reach
--         sets, and their twins), then the distinct sets paired with some of them, then
--         (optional) the moderation hash
-- ARGV[1] the member
-- ARGV[k] for each KEYS[k], k >= 2: 0 (a sorted set to remove the member from), the index in
--         KEYS of that set's distinct set (remove it, then maybe its score there), -1 (a
--         distinct set: its members are scores, never removed as members) or -2 (a hash:
--         the member's field is removed)
-- Returns {metadata removed (0|1), then 1-based positions in KEYS of the sets it was on and
-- of the hash that had its field}.

local member = ARGV[1]
local out = {redis.call('HDEL', KEYS[1], member)}
for k = 2, #KEYS do
  local pair = tonumber(ARGV[k])
  if pair == -2 then
    if redis.call('HDEL', KEYS[k], member) == 1 then out[#out + 1] = k end
  elseif pair >= 0 then
    local score = pair > 0 and redis.call('ZSCORE', KEYS[k], member)
    if redis.call('ZREM', KEYS[k], member) == 1 then
      out[#out + 1] = k
      if score and redis.call('ZCOUNT', KEYS[k], score, score) == 0 then
        redis.call('ZREMRANGEBYSCORE', KEYS[pair], score, score)
      end
    end
  end
end
return out
