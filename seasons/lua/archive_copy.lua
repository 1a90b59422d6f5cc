-- Copy a season board's final standings into its archive key, which never expires.
--
-- KEYS[1] live season sorted set   KEYS[2] archive sorted set
-- Returns the number of members archived. When the live key is gone (it expired after an
-- earlier run of the same close copied it) an existing archive is kept as it is; returns -1
-- when neither exists.

if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('COPY', KEYS[1], KEYS[2], 'REPLACE')
  redis.call('PERSIST', KEYS[2])
  return redis.call('ZCARD', KEYS[2])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.call('ZCARD', KEYS[2])
end
return -1
