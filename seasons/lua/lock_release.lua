-- Compare-and-delete: delete a key only while it still holds the caller's value (a job
-- lock's token, or the exact heartbeat this worker wrote).
--
-- KEYS[1] the key   ARGV[1] the value the caller set
-- Returns 1 if the key was deleted, 0 if it was gone or held another value.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
