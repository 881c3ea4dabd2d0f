-- Puts back what workers left: a message whose lease expired (its worker died or hung)
-- goes back to the head of its organization's queue in the lane, so it is released again
-- through the lane's pacing, or fails when it has had its last attempt; a deferred message
-- whose retry is due goes back to the tail of its organization's queue.
--
-- KEYS[1] in flight  KEYS[2] deferred  KEYS[3] roster  KEYS[4] depth (one lane)
-- ARGV[1] now  ARGV[2] lane  ARGV[3] at most this many of each  ARGV[4] max attempts
-- ARGV[5] retention ms
-- Reply: {released again, retried, failed}

local function requeue(org, id, head)
  local queue = 'mc:org:{' .. org .. '}:q:' .. ARGV[2]
  local len = head and redis.call('LPUSH', queue, id) or redis.call('RPUSH', queue, id)
  if len == 1 then redis.call('RPUSH', KEYS[3], org) end
  redis.call('INCR', KEYS[4])
end

local again, failed = 0, 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, entry in ipairs(expired) do
  redis.call('ZREM', KEYS[1], entry)
  local org, id = string.match(entry, '^(.-)|(.*)$')
  local key = 'mc:org:{' .. org .. '}:m:' .. id
  local m = redis.call('HMGET', key, 'status', 'attempts')
  if m[1] == '2' then
    if tonumber(m[2]) >= tonumber(ARGV[4]) then
      redis.call('HSET', key, 'status', 6, 'lease', '', 'updated', ARGV[1])
      redis.call('RPUSH', key .. ':ev', '6|' .. ARGV[1] .. '|lease expired after the last attempt')
      redis.call('PEXPIRE', key, tonumber(ARGV[5]))
      redis.call('PEXPIRE', key .. ':ev', tonumber(ARGV[5]))
      failed = failed + 1
    else
      redis.call('HSET', key, 'status', 1, 'lease', '', 'updated', ARGV[1])
      redis.call('RPUSH', key .. ':ev', '1|' .. ARGV[1] .. '|lease expired; back in its lane')
      requeue(org, id, true)
      again = again + 1
    end
  end
end

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, entry in ipairs(due) do
  redis.call('ZREM', KEYS[2], entry)
  local org, id = string.match(entry, '^(.-)|(.*)$')
  local key = 'mc:org:{' .. org .. '}:m:' .. id
  redis.call('HSET', key, 'status', 1, 'updated', ARGV[1])
  redis.call('RPUSH', key .. ':ev', '1|' .. ARGV[1] .. '|retry')
  requeue(org, id, false)
end
return {again, #due, failed}
