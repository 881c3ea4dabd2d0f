-- Takes or renews the right to run a singleton: a lane's scheduler, the history writer.
-- KEYS[1] the lease  ARGV[1] owner  ARGV[2] ttl ms
-- Reply: 1 held by this owner, 0 held by another.

local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
