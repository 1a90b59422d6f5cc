-- Claim one member's reward of a season, at most once: the result is checked and the claim
-- written (HSETNX) in one atomic step, so of any number of concurrent claims exactly one
-- writes and every one answers the stored claim. Each claim carries an id: a resend of the
-- call that wrote the claim (a retry after a timeout or a lost reply) is told so again.
--
-- KEYS[1] results hash of the season (member -> JSON {"rank", "score", "reward"}; "" -> the
--         summary JSON, whose "provisional" is true for a snapshot S@<ts>)
-- KEYS[2] claims hash of the season (member -> JSON {"claimed_at", "reward", "rank",
--         "claim_id"})
-- KEYS[3] best results of an amended season (member -> JSON {"rank", "score", "reward",
--         "version"}; absent: the season was never amended, KEYS[1] answers)
-- KEYS[4] upgrade claims of the season (member -> JSON of its latest upgrade claim)
-- KEYS[5] the board's moderation hash (a field: the member is hidden or banned now)
-- ARGV[1] the member   ARGV[2] now, ISO 8601 UTC (the claim's time if this one writes it)
-- ARGV[3] the claim's id (1-128 bytes)
-- Returns {status, the member's result JSON, the stored claim JSON}; status is "claimed"
-- (this call, or an earlier one with the same claim id, wrote the claim), "already" (a claim
-- with another id did), or, with nothing written and
-- nothing more returned: "not_ready" (no results yet), "provisional", "no_result",
-- "no_reward" (the member's reward is null, or void: hidden or banned now on an amended
-- season, unclaimed). On an amended season also: "void" (hidden or banned now, its claim
-- kept: answered with it), "upgraded" (this call, or an earlier one with the same claim id,
-- claimed the better reward the member's best result now has) and "upgrade_already".

--! include json

local summary = redis.call('HGET', KEYS[1], '')
if not summary then
  return {'not_ready'}
end
if cjson.decode(summary)['provisional'] == true then
  return {'provisional'}
end
local member = ARGV[1]
local amended = redis.call('EXISTS', KEYS[3]) == 1
local result
if amended then
  result = redis.call('HGET', KEYS[3], member)
  if redis.call('HEXISTS', KEYS[5], member) == 1 then
    local kept = redis.call('HGET', KEYS[2], member)
    if kept and result then
      return {'void', result, kept}
    end
    return {'no_reward'}
  end
else
  result = redis.call('HGET', KEYS[1], member)
end
if not result then
  return {'no_result'}
end
local decoded = cjson.decode(result)
local reward = decoded['reward']
if type(reward) ~= 'string' then
  return {'no_reward'}
end
-- Written as the Python side writes JSON (lib/json.lua), not as cjson would ('/' as '\/').
local claim = '{"claimed_at":' .. json_string(ARGV[2]) .. ',"reward":' .. json_string(reward)
  .. ',"rank":' .. string.format('%d', decoded['rank']) .. ',"claim_id":' .. json_string(ARGV[3])
  .. '}'
if redis.call('HSETNX', KEYS[2], member, claim) == 1 then
  return {'claimed', result, claim}
end
local stored = redis.call('HGET', KEYS[2], member)
if cjson.decode(stored)['claim_id'] == ARGV[3] then
  return {'claimed', result, stored}
end
local first = cjson.decode(stored)
if not amended or first['reward'] == reward then
  return {'already', result, stored}
end
-- The best result improved after the first claim: the better reward is claimed once more.
local up = redis.call('HGET', KEYS[4], member)
if up then
  local earlier = cjson.decode(up)
  if earlier['reward'] == reward then
    if earlier['claim_id'] == ARGV[3] then
      return {'upgraded', result, up}
    end
    return {'upgrade_already', result, up}
  end
end
local upgrade = string.sub(claim, 1, -2) .. ',"upgrade":true}'
redis.call('HSET', KEYS[4], member, upgrade)
return {'upgraded', result, upgrade}
