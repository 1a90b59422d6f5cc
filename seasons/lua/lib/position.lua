-- position: where a member stands, or would stand, in Redis's order of a sorted set.

-- Whether the bytes of `a` come before those of `b` (Lua's `<` on strings follows the
-- server's locale, not Redis's byte order).
local function bytes_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The 0-based position `m` (not on `key`) would take in Redis's order of `key` with
-- `score`: after the better scores and, among equal ones, after the members whose bytes
-- come first (a desc board lists equal scores in reverse byte order). A binary search of
-- the run of `score` by position: O(log n) per probe.
local function redis_position(key, desc, m, score)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local a, b = 0, redis.call('ZCOUNT', key, score, score)
  while a < b do
    local mid = math.floor((a + b) / 2)
    if bytes_less(redis.call('ZRANGE', key, lo + mid, lo + mid)[1], m) then
      a = mid + 1
    else
      b = mid
    end
  end
  if desc then return redis.call('ZCARD', key) - lo - a end
  return lo + a
end
