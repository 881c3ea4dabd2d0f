-- Redis Cluster, admission step 2: the organization's bucket (its own slot), after the IP's
-- token was reserved (take 1), or only to report it when the IP refused (take 0).
-- KEYS[1] the organization's projection  KEYS[2] its bucket
-- ARGV[1] now  ARGV[2] org period ms  ARGV[3..5] the quotas of plans 1..3  ARGV[6] take (1/0)
-- Reply: {verdict, plan, slug, remaining, ms to full, retry-after ms}; MISS without a projection.

return admitOrg(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), {ARGV[3], ARGV[4], ARGV[5]}, ARGV[6] == '1')
