-- A worker's result for a leased message. Only the current lease counts: after a lease
-- expired and the message went to another worker, the old lease's ack changes nothing.
--
-- KEYS[1] message hash  KEYS[2] message events  KEYS[3] lane in flight  KEYS[4] lane deferred
-- ARGV[1] now  ARGV[2] lease id  ARGV[3] outcome (1 delivered, 2 bounced, 3 deferred)
-- ARGV[4] detail  ARGV[5] max attempts  ARGV[6] retry base ms  ARGV[7] bounce cooldown ms
-- ARGV[8] retention ms  ARGV[9] the in-flight entry (org|id)
-- Reply: {current (1/0), status}

local now = tonumber(ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'lease', 'status', 'attempts', 'mailbox')
if m[2] ~= '2' or m[1] ~= ARGV[2] then return {0, tonumber(m[2] or '0')} end
redis.call('ZREM', KEYS[3], ARGV[9])

local status
local outcome, attempts = ARGV[3], tonumber(m[3])
if outcome == '1' then
  status = 3
elseif outcome == '2' then
  status = 5
  local cooldown = tonumber(ARGV[7])
  redis.call('SET', 'mc:cooldown:' .. m[4], now + cooldown, 'PX', cooldown)
elseif attempts >= tonumber(ARGV[5]) then
  status = 6
else
  status = 4
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[6]) * 2 ^ (attempts - 1), ARGV[9])
end

redis.call('HSET', KEYS[1], 'status', status, 'lease', '', 'updated', ARGV[1])
redis.call('RPUSH', KEYS[2], status .. '|' .. ARGV[1] .. '|' .. ARGV[4])
if status ~= 4 then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[8]))
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[8]))
end
return {1, status}
