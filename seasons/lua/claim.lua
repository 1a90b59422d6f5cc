-- Claim one member's reward of a season, at most once: the result is checked and the claim
-- written (HSETNX) in one atomic step, so of any number of concurrent claims exactly one
-- writes and every one answers the stored claim. Each claim carries an id: a resend of the
-- call that wrote the claim (a retry after a timeout or a lost reply) is told so again.
--
-- KEYS[1] results hash of the season (member -> JSON {"rank", "score", "reward"}; "" -> the
--         summary JSON, whose "provisional" is true for a snapshot S@<ts>)
-- KEYS[2] claims hash of the season (member -> JSON {"claimed_at", "reward", "rank",
--         "claim_id"})
-- ARGV[1] the member   ARGV[2] now, ISO 8601 UTC (the claim's time if this one writes it)
-- ARGV[3] the claim's id (1-128 bytes)
-- Returns {status, the member's result JSON, the stored claim JSON}; status is "claimed"
-- (this call, or an earlier one with the same claim id, wrote the claim), "already" (a claim
-- with another id did), or, with nothing written and
-- nothing more returned: "not_ready" (no results yet), "provisional", "no_result",
-- "no_reward" (the member's reward is null).

--! include json

local summary = redis.call('HGET', KEYS[1], '')
if not summary then
  return {'not_ready'}
end
if cjson.decode(summary)['provisional'] == true then
  return {'provisional'}
end
local member = ARGV[1]
local result = redis.call('HGET', KEYS[1], member)
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
return {'already', result, stored}
