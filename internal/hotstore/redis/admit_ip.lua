-- Redis Cluster, admission step 1: takes one token from a client IP's bucket (its own slot).
-- When the organization then refuses the request, refund_ip gives it back: a decision that
-- spans the two slots is reserve, then commit or refund, and never admits more than either
-- bucket allows.
-- KEYS[1] the IP bucket  ARGV[1] now  ARGV[2] IP quota  ARGV[3] IP period ms
-- Reply: {1, 0} taken, or {0, retry-after ms}.

local now, quota, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local l, at = bucketLevel(KEYS[1], quota, period, now)
if l < period then return {0, math.max(0, math.ceil((period - l) / quota))} end
bucketSave(KEYS[1], l - period, at, quota, period)
return {1, 0}
