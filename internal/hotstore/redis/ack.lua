-- A worker's result for a leased message. Only the current lease counts: after a lease expired
-- and the message went to another worker, the old lease's ack changes nothing.
--
-- KEYS[1] message  KEYS[2] lane in flight  KEYS[3] lane deferred
-- ARGV[1] now  ARGV[2] lease id  ARGV[3] outcome (1 delivered, 2 bounced, 3 deferred)
-- ARGV[4] detail  ARGV[5] max attempts  ARGV[6] retry base ms  ARGV[7] bounce cooldown ms
-- ARGV[8] org id  ARGV[9] message id
-- Reply: {current (1/0), status}

local now = tonumber(ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'lease', 'status', 'attempts', 'mailbox')
if tonumber(m[2]) ~= S.SENDING or m[1] ~= ARGV[2] then return {0, tonumber(m[2] or '0')} end
local entry = ref(ARGV[8], ARGV[9])
redis.call('ZREM', KEYS[2], entry)

local status
local outcome, attempts = ARGV[3], tonumber(m[3])
if outcome == '1' then
  status = S.DELIVERED
elseif outcome == '2' then
  status = S.BOUNCED
  local cooldown = tonumber(ARGV[7])
  redis.call('SET', key('cooldown', m[4]), now + cooldown, 'PX', cooldown)
elseif attempts >= tonumber(ARGV[5]) then
  status = S.FAILED
else
  status = S.DEFERRED
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[6]) * 2 ^ (attempts - 1), entry)
end

redis.call('HSET', KEYS[1], 'status', status, 'lease', '', 'updated', ARGV[1])
record(ARGV[8], ARGV[9], status, ARGV[1], ARGV[4])
return {1, status}
