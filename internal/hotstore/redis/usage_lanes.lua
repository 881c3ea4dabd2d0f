-- Reads what the console shows of an organization's messages in the lanes: per lane, those
-- waiting and those released over the last whole seconds. One slot: {mail}.
--
-- KEYS[1..n] the organization's queue in each lane
-- ARGV[1] now  ARGV[2] org id  ARGV[3] release window s  ARGV[4..] the lanes, in KEYS' order
-- Reply: {{waiting, released}, ...} in the lanes' order

local second = math.floor(tonumber(ARGV[1]) / 1000)
local lanes = {}
for i, queue in ipairs(KEYS) do
  local lane = ARGV[3 + i]
  local released = 0
  for s = second - tonumber(ARGV[3]), second - 1 do
    released = released + tonumber(redis.call('HGET', key('released', ARGV[2], s), lane) or 0)
  end
  lanes[#lanes + 1] = {redis.call('LLEN', queue), released}
end
return lanes
