-- bulk: Redis commands over many names at once (a batch's members, event ids, fields), in
-- runs that unpack can take. Apart because every part of write.lua reads this way, so that
-- each reads a key once per batch rather than once per event.

-- `fn(...)` with each run of at most `size` items of `list` as its arguments (unpack has
-- a limit), for a command that takes many at once.
local function chunked(list, size, fn)
  for from = 1, #list, size do fn(unpack(list, from, math.min(from + size - 1, #list))) end
end

-- What `command` (ZMSCORE, HMGET) answers for each of `names` on `key`, one call per 1000
-- (unpack has a limit): name -> the value, or false (none).
local function values_of(command, key, names)
  local out = {}
  for from = 1, #names, 1000 do
    local upto = math.min(from + 999, #names)
    local got = redis.call(command, key, unpack(names, from, upto))
    for i = from, upto do out[names[i]] = got[i - from + 1] or false end
  end
  return out
end

-- Each of `names`' field of the hash `key`: name -> its value, or false. Redis keeps a hash
-- of at most hash-max-listpack-entries fields (128 by default) as one list, which HMGET scans
-- once per field asked: from a few dozen names on, reading such a hash whole (HGETALL) costs
-- Redis less (bench/moderation.py's writes measure it on a moderation hash of 100 members).
local SMALL_HASH, MANY_NAMES = 128, 32
local function fields_of(key, names)
  if #names < MANY_NAMES then return values_of('HMGET', key, names) end
  local size = redis.call('HLEN', key)
  if size > SMALL_HASH then return values_of('HMGET', key, names) end
  local all, out = {}, {}
  if size > 0 then
    local flat = redis.call('HGETALL', key)
    for i = 1, #flat, 2 do all[flat[i]] = flat[i + 1] end
  end
  for _, name in ipairs(names) do out[name] = all[name] or false end
  return out
end

-- Each of `members`' score on `key`: member -> Redis's text of it, or false (not there).
local function scores_of(key, members)
  return values_of('ZMSCORE', key, members)
end
