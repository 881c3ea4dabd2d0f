-- Admission: the IP bucket and, for a token, the organization bucket, checked and
-- consumed in one atomic step (both or neither). The arithmetic is internal/bucket:
-- levels in integer units of 1/period of a token, a missing key is a full bucket.
--
-- KEYS[1] IP bucket
-- KEYS[2] token key (holds the org id)   \
-- KEYS[3] org hash (slug, plan)           > absent when no token was presented
-- KEYS[4] org bucket                     /
-- ARGV[1] now (ms)  ARGV[2] IP quota  ARGV[3] IP period (ms)
-- ARGV[4] expected org id  ARGV[5] org period (ms)  ARGV[6..8] quota of plan 1..3
-- ARGV[9] the minimum quota (advertised without a valid token)
--
-- Reply: {verdict, plan, slug, remaining, reset ms, retry-after ms}
-- verdict: 1 allowed, 2 unauthenticated, 3 org limited, 4 IP limited.

local now = tonumber(ARGV[1])

local function level(key, quota, period)
  local s = redis.call('HMGET', key, 'l', 't')
  local capacity = quota * period
  if not s[1] then return capacity, now end
  local at = tonumber(s[2])
  local l = tonumber(s[1]) + math.max(0, now - at) * quota
  if l > capacity then l = capacity end
  return l, math.max(now, at)
end

local function save(key, l, at, quota, period)
  local deficit = quota * period - l
  redis.call('HSET', key, 'l', l, 't', at)
  redis.call('PEXPIRE', key, math.ceil(deficit / quota) + 1000)
end

local ipQuota, ipPeriod = tonumber(ARGV[2]), tonumber(ARGV[3])
local ipLevel, ipAt = level(KEYS[1], ipQuota, ipPeriod)
local ipAllows = ipLevel >= ipPeriod
local ipRetry = math.max(0, math.ceil((ipPeriod - ipLevel) / ipQuota))

local valid = #KEYS == 4 and redis.call('GET', KEYS[2]) == ARGV[4]
local org = valid and redis.call('HMGET', KEYS[3], 'plan', 'slug')
if not org or not org[1] then
  local minimum = tonumber(ARGV[9])
  if not ipAllows then return {4, 0, '', minimum, 0, ipRetry} end
  save(KEYS[1], ipLevel - ipPeriod, ipAt, ipQuota, ipPeriod)
  return {2, 0, '', minimum, 0, 0}
end

local plan = tonumber(org[1])
local quota, period = tonumber(ARGV[5 + plan]), tonumber(ARGV[5])
local orgLevel, orgAt = level(KEYS[4], quota, period)
local function reply(verdict, l, retry)
  return {verdict, plan, org[2], math.floor(l / period), math.ceil((quota * period - l) / quota), retry}
end
if not ipAllows then return reply(4, orgLevel, ipRetry) end
if orgLevel < period then return reply(3, orgLevel, math.ceil((period - orgLevel) / quota)) end

save(KEYS[1], ipLevel - ipPeriod, ipAt, ipQuota, ipPeriod)
save(KEYS[4], orgLevel - period, orgAt, quota, period)
return reply(1, orgLevel - period, 0)
