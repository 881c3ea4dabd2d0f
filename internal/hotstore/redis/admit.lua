-- Admits a batch of API requests, in order, each as it would be alone: the client IP's bucket
-- and, for a valid token whose organization the caller knows, the organization's bucket, checked
-- together and consumed together (both or neither). One script per batch: one command, one
-- reply and one pass of Redis's command overhead for the whole batch instead of one per request.
--
-- KEYS, per request in order: the IP bucket; with a known organization also the token, the
--   organization's projection and its bucket
-- ARGV[1] now  ARGV[2] IP quota  ARGV[3] IP period ms  ARGV[4] org period ms
-- ARGV[5..7] the quotas of plans 1..3  ARGV[8] the minimum policy's quota
-- ARGV[9..] per request: the organization the caller knows for its token, or ''
-- Reply, per request: {verdict, plan (0 without an organization), slug, remaining, ms to full, retry-after ms}

local now = tonumber(ARGV[1])
local ipQuota, ipPeriod, orgPeriod = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local quotas = {ARGV[5], ARGV[6], ARGV[7]}
local minimum = tonumber(ARGV[8])

local function admitRequest(ipKey, orgId, tokenKey, projection, orgBucket)
  local ipLevel, ipAt = bucketLevel(ipKey, ipQuota, ipPeriod, now)
  local ipAllows = ipLevel >= ipPeriod
  local ipRetry = math.max(0, math.ceil((ipPeriod - ipLevel) / ipQuota))

  local known = false
  if orgId ~= '' then
    local owner = redis.call('GET', tokenKey)
    if owner ~= '' then
      if owner ~= orgId then return {V.MISS, 0, '', 0, 0, 0} end
      known = true
    end
  end

  if not known then
    if not ipAllows then return {V.IP_LIMITED, 0, '', minimum, 0, ipRetry} end
    bucketSave(ipKey, ipLevel - ipPeriod, ipAt, ipQuota, ipPeriod)
    return {V.UNAUTHENTICATED, 0, '', minimum, 0, 0}
  end

  -- The organization's bucket is taken only when the IP allows, and the IP's only when the organization does.
  local reply = admitOrg(projection, orgBucket, now, orgPeriod, quotas, ipAllows)
  if reply[1] == V.IP_LIMITED then reply[6] = ipRetry end
  if reply[1] == V.ALLOWED then bucketSave(ipKey, ipLevel - ipPeriod, ipAt, ipQuota, ipPeriod) end
  return reply
end

local replies = {}
local k = 1
for i = 9, #ARGV do
  local orgId = ARGV[i]
  replies[#replies + 1] = admitRequest(KEYS[k], orgId, KEYS[k + 1], KEYS[k + 2], KEYS[k + 3])
  k = k + (orgId == '' and 1 or 4)
end
return replies
