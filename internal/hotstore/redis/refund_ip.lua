-- Redis Cluster, admission: gives back the token admit_ip took, when the organization refused
-- the request (or its projection was missing). Never above the bucket's capacity.
-- KEYS[1] the IP bucket  ARGV[1] now  ARGV[2] IP quota  ARGV[3] IP period ms

local now, quota, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local l, at = bucketLevel(KEYS[1], quota, period, now)
bucketSave(KEYS[1], math.min(quota * period, l + period), at, quota, period)
return 1
