-- A worker's result for a leased message. Only the current lease counts: after a lease expired
-- and the message went to another worker, the old lease's ack changes nothing. The status it
-- gives is hotstore.ts's ackedStatus: delivered; bounced (the mailbox on cooldown); rejected,
-- failed at once without cooldown; deferred, on the schedule in hours when the daemon gives its
-- decision (retry at, or -1: the retries are over), else on the short one (max attempts, the
-- base wait doubling).
--
-- KEYS[1] message  KEYS[2] lane in flight  KEYS[3] lane deferred
-- ARGV[1] now  ARGV[2] lease id  ARGV[3] outcome (1 delivered, 2 bounced, 3 deferred, 4 rejected)
-- ARGV[4] detail  ARGV[5] max attempts  ARGV[6] retry base ms  ARGV[7] bounce cooldown ms
-- ARGV[8] org id  ARGV[9] message id
-- ARGV[10] the schedule in hours: '' (none), or 'first|until|retry at or -1'
-- ARGV[11] its delayed notice to record ('' none)  ARGV[12..] the tries, one JSON object each
-- Reply: {current (1/0), status}

local now = tonumber(ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'lease', 'status', 'attempts', 'mailbox')
if tonumber(m[2]) ~= S.SENDING or m[1] ~= ARGV[2] then return {0, tonumber(m[2] or '0')} end
local org, id = ARGV[8], ARGV[9]
local entry = ref(org, id)
redis.call('ZREM', KEYS[2], entry)

local status, due
local outcome, attempts = ARGV[3], tonumber(m[3])
if outcome == '1' then
  status = S.DELIVERED
elseif outcome == '2' then
  status = S.BOUNCED
  local cooldown = tonumber(ARGV[7])
  redis.call('SET', key('cooldown', m[4]), now + cooldown, 'PX', cooldown)
elseif outcome == '4' then
  status = S.FAILED
elseif ARGV[10] ~= '' then
  local first, till, at = string.match(ARGV[10], '^(%d+)|(%d+)|(-?%d+)$')
  redis.call('HSETNX', KEYS[1], 'first', first)
  redis.call('HSET', KEYS[1], 'until', till)
  if at == '-1' then status = S.FAILED else status, due = S.DEFERRED, tonumber(at) end
elseif attempts >= tonumber(ARGV[5]) then
  status = S.FAILED
else
  status, due = S.DEFERRED, now + tonumber(ARGV[6]) * 2 ^ (attempts - 1)
end
if due then redis.call('ZADD', KEYS[3], due, entry) end

redis.call('HSET', KEYS[1], 'status', status, 'lease', '', 'updated', ARGV[1])
for i = 12, #ARGV do redis.call('RPUSH', key('attempts', org, id), ARGV[i]) end
record(org, id, status, ARGV[1], ARGV[4])
if ARGV[11] ~= '' and status == S.DEFERRED then
  redis.call('HSET', KEYS[1], 'delayed', 1)
  record(org, id, S.DELAYED, ARGV[1], ARGV[11])
end
return {1, status}
