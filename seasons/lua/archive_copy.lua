-- Copy a season board's final standings into its archive key, which never expires.
--
-- KEYS[1] live season sorted set   KEYS[2] archive sorted set
-- KEYS[3], KEYS[4] (a board with ties = "earliest" only): the live season's reach set and
--         the archive's, copied alike (no TTL)
-- Returns the number of members archived. When the live key is gone (it expired after an
-- earlier run of the same close copied it) an existing archive is kept as it is, its reach
-- set too; returns -1 when neither exists.

local function persist_copy(from, to)
  redis.call('COPY', from, to, 'REPLACE')
  redis.call('PERSIST', to)
end

if redis.call('EXISTS', KEYS[1]) == 1 then
  persist_copy(KEYS[1], KEYS[2])
  if KEYS[3] then
    if redis.call('EXISTS', KEYS[3]) == 1 then
      persist_copy(KEYS[3], KEYS[4])
    else
      redis.call('DEL', KEYS[4])  -- a live board without reach times: none archived
    end
  end
  return redis.call('ZCARD', KEYS[2])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.call('ZCARD', KEYS[2])
end
return -1
