-- trim: keep the `max_entries` best members of the sorted set `key` in the board's order
-- (`desc`: the highest scores first) and remove the rest; a set no longer than that is left
-- as it is.
local function trim_board(key, desc, max_entries)
  if desc then
    redis.call('ZREMRANGEBYRANK', key, 0, -(max_entries + 1))
  else
    redis.call('ZREMRANGEBYRANK', key, max_entries, -1)
  end
end
