-- Holds an organization's messages waiting in a lane (its bulk sends paused), or lets them go:
-- release.lua skips a held organization and takes it off the roster; let go with messages waiting,
-- it goes back on the roster (at its end, as a newcomer) and the lane's scheduler is woken.
--
-- KEYS[1] the lane's held organizations  KEYS[2] the lane's roster  KEYS[3] the organization's queue in the lane
-- ARGV[1] org  ARGV[2] lane  ARGV[3] 1 hold, 0 let go
-- Reply: 1 when it changed, 0 when it was so already.

if ARGV[3] == '1' then return redis.call('SADD', KEYS[1], ARGV[1]) end
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('LLEN', KEYS[3]) > 0 and not redis.call('LPOS', KEYS[2], ARGV[1]) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  signalWaiting(ARGV[2])
end
return 1
