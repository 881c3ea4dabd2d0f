-- Puts a mailbox on bounce cooldown until now + cooldown ms, unless it is already cooled longer
-- (a bounce learned after the delivery: a delivery status notification).
-- KEYS[1] the mailbox's cooldown  ARGV[1] now  ARGV[2] cooldown ms
-- Reply: when the cooldown ends (ms).

local now, cooldown = tonumber(ARGV[1]), tonumber(ARGV[2])
local untilMs = now + cooldown
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current >= untilMs then return current end
redis.call('SET', KEYS[1], untilMs, 'PX', cooldown)
return untilMs
