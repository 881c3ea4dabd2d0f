-- Writes an organization's projection (what admission and sending read), unless the one there
-- has a newer version: a rebuild from older records never undoes a newer write-through.
-- KEYS[1] the projection  ARGV[1] version  ARGV[2] slug  ARGV[3] plan  ARGV[4] a new audience stamp
-- ARGV[5..] verified domains
-- Reply: 1 written, 0 a newer one is there.

local have = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if have > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'slug', ARGV[2], 'plan', ARGV[3], 'a', ARGV[4])
for i = 5, #ARGV do redis.call('HSET', KEYS[1], 'd:' .. ARGV[i], 1) end
return 1
