-- Puts back what workers left: a message whose lease expired (its worker died or hung) goes back
-- to the head of its organization's queue in the lane, so it is released again through the
-- lane's pacing, or fails when it has had its last attempt (hotstore.ts's leaseExpiryFails: past
-- the end of its retries under the schedule in hours, else its last attempt of the short one); a deferred message whose retry is
-- due goes back to the tail of its organization's queue.
--
-- KEYS[1] in flight  KEYS[2] deferred  KEYS[3] roster  KEYS[4] depth (one lane)
-- ARGV[1] now  ARGV[2] lane  ARGV[3] at most this many of each  ARGV[4] max attempts
-- Reply: {released again, retried, failed, the earliest lease expiry or retry left (ms), or -1}

local function requeue(org, id, head)
  local queue = key('orgQueue', ARGV[2], org)
  local len = head and redis.call('LPUSH', queue, id) or redis.call('RPUSH', queue, id)
  if len == 1 then redis.call('RPUSH', KEYS[3], org) end
  if redis.call('INCR', KEYS[4]) == 1 then signalWaiting(ARGV[2]) end
end

local again, failed = 0, 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, entry in ipairs(expired) do
  redis.call('ZREM', KEYS[1], entry)
  local org, id = unref(entry)
  local m = key('message', org, id)
  local fields = redis.call('HMGET', m, 'status', 'attempts', 'until')
  if tonumber(fields[1]) == S.SENDING then
    local fails
    if fields[3] then fails = tonumber(ARGV[1]) >= tonumber(fields[3]) else fails = tonumber(fields[2]) >= tonumber(ARGV[4]) end
    if fails then
      redis.call('HSET', m, 'status', S.FAILED, 'lease', '', 'updated', ARGV[1])
      record(org, id, S.FAILED, ARGV[1], 'lease expired after the last attempt')
      failed = failed + 1
    else
      redis.call('HSET', m, 'status', S.QUEUED, 'lease', '', 'updated', ARGV[1])
      record(org, id, S.QUEUED, ARGV[1], 'lease expired; back in its lane')
      requeue(org, id, true)
      again = again + 1
    end
  end
end

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, entry in ipairs(due) do
  redis.call('ZREM', KEYS[2], entry)
  local org, id = unref(entry)
  redis.call('HSET', key('message', org, id), 'status', S.QUEUED, 'updated', ARGV[1])
  record(org, id, S.QUEUED, ARGV[1], 'retry')
  requeue(org, id, false)
end
local next = -1
for _, k in ipairs({KEYS[1], KEYS[2]}) do
  local first = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if first[2] and (next < 0 or tonumber(first[2]) < next) then next = tonumber(first[2]) end
end
return {again, #due, failed, next}
