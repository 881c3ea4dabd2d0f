-- Releases the next message of a lane: the organization at the head of the roster gives its
-- oldest message, and goes to the back of the roster if it has more (round-robin). An
-- organization is on the roster exactly while its queue in the lane is not empty.
--
-- KEYS[1] the lane's roster  KEYS[2] the lane's ready list  KEYS[3] lane depth
-- ARGV[1] now  ARGV[2] lane
-- Reply: {org, message id} or nil.
-- The organization's queue and message keys are derived here from the prelude's layout.

local org = redis.call('LPOP', KEYS[1])
while org do
  local queue = key('orgQueue', ARGV[2], org)
  local id = redis.call('LPOP', queue)
  if id then
    if redis.call('LLEN', queue) > 0 then redis.call('RPUSH', KEYS[1], org) end
    redis.call('DECR', KEYS[3])
    -- The ready list was empty: wake the daemons' idle lease streams.
    if redis.call('RPUSH', KEYS[2], ref(org, id)) == 1 then redis.call('PUBLISH', K.signals, 'r') end
    record(org, id, S.QUEUED, ARGV[1], 'released')
    -- The organization's release rate, for the console.
    local released = key('released', org, math.floor(tonumber(ARGV[1]) / 1000))
    redis.call('HINCRBY', released, ARGV[2], 1)
    redis.call('PEXPIRE', released, RELEASED_KEEP_MS)
    return {org, id}
  end
  org = redis.call('LPOP', KEYS[1])
end
return nil
