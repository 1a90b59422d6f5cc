-- Copy a season board's final standings into its archive key, which never expires.
--
-- KEYS[1] live season sorted set   KEYS[2] archive sorted set
-- KEYS[3], KEYS[4] (a board with ties = "earliest" or "dense" only): the live season's reach
--         set and the archive's, or its distinct set and the archive's, copied alike (no TTL)
-- ARGV[1] (optional) 'distinct': KEYS[3], KEYS[4] are distinct sets; an archive left without
--         one (its live board had none: written before distinct sets existed) gets it built
--         from the archive (lib/trim.lua)
-- Returns the number of members archived. When the live key is gone (it expired after an
-- earlier run of the same close copied it) an existing archive is kept as it is, its reach
-- or distinct set too (a missing distinct set is built); returns -1 when neither exists.
-- KEYS[1] = KEYS[2] (a restore, after writing the archive): only that last case.

--! include trim

local dense = ARGV[1] == 'distinct'

local function persist_copy(from, to)
  redis.call('COPY', from, to, 'REPLACE')
  redis.call('PERSIST', to)
end

local function distinct_kept()
  if dense and redis.call('EXISTS', KEYS[4]) == 0 then distinct_rebuild(KEYS[2], KEYS[4]) end
end

if KEYS[1] ~= KEYS[2] and redis.call('EXISTS', KEYS[1]) == 1 then
  persist_copy(KEYS[1], KEYS[2])
  if KEYS[3] then
    if redis.call('EXISTS', KEYS[3]) == 1 then
      persist_copy(KEYS[3], KEYS[4])
    else
      redis.call('DEL', KEYS[4])  -- a live board without reach times: none archived
    end
  end
  distinct_kept()
  return redis.call('ZCARD', KEYS[2])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  distinct_kept()
  return redis.call('ZCARD', KEYS[2])
end
return -1
