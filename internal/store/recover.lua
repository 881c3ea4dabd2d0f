-- Releases again the messages whose lease expired (the worker died or hung), and puts
-- deferred messages whose retry is due back into their lane, behind the pacing.
--
-- KEYS[1] in flight  KEYS[2] deferred  KEYS[3] ready  KEYS[4] roster  KEYS[5] depth (one lane)
-- ARGV[1] now  ARGV[2] lane  ARGV[3] at most this many of each
-- Reply: {expired, retried}

local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, entry in ipairs(expired) do
  redis.call('ZREM', KEYS[1], entry)
  local org, id = string.match(entry, '^(.-)|(.*)$')
  local key = 'mc:org:{' .. org .. '}:m:' .. id
  if redis.call('HGET', key, 'status') == '2' then
    redis.call('HSET', key, 'status', 1, 'lease', '', 'updated', ARGV[1])
    redis.call('RPUSH', key .. ':ev', '1|' .. ARGV[1] .. '|lease expired; released again')
    redis.call('RPUSH', KEYS[3], entry)
  end
end

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, entry in ipairs(due) do
  redis.call('ZREM', KEYS[2], entry)
  local org, id = string.match(entry, '^(.-)|(.*)$')
  local key = 'mc:org:{' .. org .. '}:m:' .. id
  redis.call('HSET', key, 'status', 1, 'updated', ARGV[1])
  redis.call('RPUSH', key .. ':ev', '1|' .. ARGV[1] .. '|retry')
  local queue = 'mc:org:{' .. org .. '}:q:' .. ARGV[2]
  if redis.call('RPUSH', queue, id) == 1 then redis.call('RPUSH', KEYS[4], org) end
  redis.call('INCR', KEYS[5])
end
return {#expired, #due}
