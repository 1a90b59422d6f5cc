-- Claim one member's cohort reward of a league period, at most once (as claim.lua does for
-- a season): the outcome is checked and the claim written (HSETNX) in one atomic step, so of
-- any number of concurrent claims exactly one writes and every one answers the stored claim;
-- a resend with the writing claim's id is told so again.
--
-- KEYS[1] the league's state hash ("closed:<P>" once the period's close is complete)
-- KEYS[2] the period's outcome hash (member -> Outcome JSON: "rank", "reward", ...)
-- KEYS[3] the period's claims hash (member -> JSON {"claimed_at", "reward", "rank",
--         "claim_id"})
-- ARGV[1] the member   ARGV[2] now, ISO 8601 UTC   ARGV[3] the claim's id
-- ARGV[4] the period id
-- Returns {status, the member's outcome JSON, the stored claim JSON}: "claimed" (this call,
-- or an earlier one with the same claim id, wrote the claim) or "already" (another id did);
-- or, with nothing written and nothing more returned: "not_ready" (the close is not
-- complete), "no_result" (no outcome), "no_reward" (an outcome without reward).

--! include json

if #ARGV ~= 4 then error('league_claim.lua: ARGV: must be 4 arguments, got ' .. #ARGV, 0) end
if redis.call('HEXISTS', KEYS[1], 'closed:' .. ARGV[4]) == 0 then
  return {'not_ready'}
end
local member = ARGV[1]
local result = redis.call('HGET', KEYS[2], member)
if not result then
  return {'no_result'}
end
local decoded = cjson.decode(result)
local reward = decoded['reward']
if type(reward) ~= 'string' or type(decoded['rank']) ~= 'number' then
  return {'no_reward'}
end
local claim = '{"claimed_at":' .. json_string(ARGV[2]) .. ',"reward":' .. json_string(reward)
  .. ',"rank":' .. string.format('%d', decoded['rank']) .. ',"claim_id":' .. json_string(ARGV[3])
  .. '}'
if redis.call('HSETNX', KEYS[3], member, claim) == 1 then
  return {'claimed', result, claim}
end
local stored = redis.call('HGET', KEYS[3], member)
if cjson.decode(stored)['claim_id'] == ARGV[3] then
  return {'claimed', result, stored}
end
return {'already', result, stored}
