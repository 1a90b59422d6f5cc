-- Extend a job lock's expiry, only while the caller still holds it.
--
-- KEYS[1] the lock   ARGV[1] the caller's token   ARGV[2] new time to live, milliseconds
-- Returns 1 if extended, 0 if the lock was lost (expired or taken by another worker).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
