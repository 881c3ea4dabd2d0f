-- Drops messages that are still at the given versions, from wherever they are in their lane,
-- with their record, events, tries and outbox entry (copies older than the records).
-- KEYS[1] the outbox  ARGV: org id, message id, version, ... (triples)
-- Reply: how many were dropped.

local dropped = 0
for i = 1, #ARGV, 3 do
  local org, id = ARGV[i], ARGV[i + 1]
  local message = key('message', org, id)
  local fields = redis.call('HMGET', message, 'v', 'lane')
  if fields[1] == ARGV[i + 2] then
    local lane, entry = fields[2], ref(org, id)
    local queue = key('orgQueue', lane, org)
    if redis.call('LREM', queue, 0, id) > 0 then
      redis.call('DECR', key('depth', lane))
      -- An organization is on the roster exactly while its queue is not empty.
      if redis.call('LLEN', queue) == 0 then redis.call('LREM', key('roster', lane), 0, org) end
    end
    redis.call('LREM', key('ready', lane), 0, entry)
    redis.call('ZREM', key('inFlight', lane), entry)
    redis.call('ZREM', key('deferred', lane), entry)
    redis.call('ZREM', KEYS[1], entry)
    uncountHeld(org, message)
    redis.call('DEL', message, key('events', org, id), key('attempts', org, id))
    dropped = dropped + 1
  end
end
return dropped
