-- held_records: the records of held events (docs/writes.md#held-events), which the review
-- (seasons/held.py, held_reject.lua) reads and decides: keep_held() stores the events the
-- limits held (lib/limits.lua), approve_held() marks the record an approval applied, and
-- drop_old_held() is the upkeep every write does. Apart because it is the held keys' own
-- format (one JSON record per event, "state" first), which nothing else of the write reads.
-- `held` is the batch's {record, order, done, cutoff, expire_at} (lib/write_batch.lua).

--! include json
--! include bulk

-- The held events of `batch` (held_as: i -> {reason, score before or false, window, limit}),
-- one record each, its "state" first, which a decision rewrites; answers {{index, event id,
-- reason}, ...}, what the batch's answer lists. An event without an id is named by its batch
-- id and index. `event_id_of(i)`, `metadata_of(i)`: the i-th event's, or false; the events'
-- columns are read by lib/write_batch.lua's numbers.
local function keep_held(batch, held_as, event_id_of, metadata_of)
  local all, groups, held, now = batch.events, batch.groups, batch.held, batch.now
  local batch_id = batch.batch_id
  local held_list, held_set, held_order = {}, {}, {}
  for i = 1, #all do
    local h = held_as[i]
    if h then
      local ev = all[i]
      local id = event_id_of(i) or (batch_id .. '#' .. ev[INDEX])
      local meta_given = metadata_of(i)
      local record = '{"state":"held","event_id":' .. json_string(id)
        .. ',"generated":' .. (event_id_of(i) and 'false' or 'true')
        .. ',"batch_id":' .. json_string(batch_id) .. ',"index":' .. ev[INDEX]
        .. ',"member":' .. json_string(ev[MEMBER]) .. ',"value":' .. json_number(ev[VALUE])
        .. ',"ts":' .. json_number(ev[TS]) .. ',"day":' .. json_string(groups[ev[GROUP] + 1].day)
        .. ',"metadata":' .. (meta_given and meta_given:sub(2) or 'null')
        .. ',"metadata_merge":' .. (meta_given and meta_given:sub(1, 1) == '~' and 'true' or 'false')
        .. ',"reason":' .. json_string(h[1]) .. ',"window":' .. json_string(h[3])
        .. ',"score":' .. (h[2] and json_number(h[2]) or 'null')
        .. ',"limit":' .. json_number(h[4]) .. ',"arrived_at":' .. json_number(now) .. '}'
      held_list[#held_list + 1] = {ev[INDEX], id, h[1]}
      held_set[#held_set + 1] = id
      held_set[#held_set + 1] = record
      held_order[#held_order + 1] = now
      held_order[#held_order + 1] = id
    end
  end
  if #held_list > 0 then
    chunked(held_set, 1000, function(...) redis.call('HSET', held.record, ...) end)
    chunked(held_order, 1000, function(...) redis.call('ZADD', held.order, ...) end)
    redis.call('EXPIREAT', held.record, held.expire_at)
    redis.call('EXPIREAT', held.order, held.expire_at)
  end
  return held_list
end

-- The record of the held event `id`, approved at `now`: its state rewritten in place (the
-- rest is the text stored), and the event moved from the held ones to the decided ones.
local function approve_held(held, id, now)
  local record = redis.call('HGET', held.record, id)
  local rest = record:sub(#'{"state":"held",' + 1)
  redis.call('HSET', held.record, id,
    '{"state":"approved","decided_at":' .. json_number(now) .. ',' .. rest)
  redis.call('ZREM', held.order, id)
  redis.call('ZADD', held.done, now, id)
  redis.call('EXPIREAT', held.done, held.expire_at)
end

-- Held records past retention (held.cutoff), and decided ones past the dedupe window
-- (`cutoff`): at most 100 of each per write, bounded work (each write holds at most its
-- batch). A board that never held an event has neither key.
local function drop_old_held(held, cutoff)
  if redis.call('EXISTS', held.order, held.done) == 0 then return end
  for _, drop in ipairs({{held.order, held.cutoff}, {held.done, cutoff}}) do
    local old = redis.call('ZRANGEBYSCORE', drop[1], '-inf', '(' .. drop[2], 'LIMIT', 0, 100)
    if #old > 0 then
      redis.call('ZREM', drop[1], unpack(old))
      redis.call('HDEL', held.record, unpack(old))
    end
  end
end
