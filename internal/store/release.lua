-- Releases the next message of a lane: the organization at the head of the roster gives
-- its oldest message, and goes to the back of the roster if it has more (round-robin).
-- An organization is on the roster exactly while its queue in the lane is not empty.
--
-- KEYS[1] the lane's roster   KEYS[2] the lane's ready list   KEYS[3] lane depth
-- ARGV[1] now   ARGV[2] lane
-- Reply: {org, message id} or nil.
-- The org's queue and message keys are derived here (one Redis primary; see README).

local org = redis.call('LPOP', KEYS[1])
while org do
  local queue = 'mc:org:{' .. org .. '}:q:' .. ARGV[2]
  local id = redis.call('LPOP', queue)
  if id then
    if redis.call('LLEN', queue) > 0 then redis.call('RPUSH', KEYS[1], org) end
    redis.call('DECR', KEYS[3])
    redis.call('RPUSH', KEYS[2], org .. '|' .. id)
    redis.call('RPUSH', 'mc:org:{' .. org .. '}:m:' .. id .. ':ev', '1|' .. ARGV[1] .. '|released')
    return {org, id}
  end
  org = redis.call('LPOP', KEYS[1])
end
return nil
