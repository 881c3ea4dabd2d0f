-- Reads what the console shows of an organization's requests: its bucket as admission would see
-- it now (nothing consumed) and its refusals per minute over the last hour. One slot: {org}.
--
-- KEYS[1] the organization's request bucket
-- ARGV[1] now  ARGV[2] org id  ARGV[3] quota  ARGV[4] period ms  ARGV[5] minutes
-- Reply: {remaining, ms to full, {{minute start ms, quota, ip, recipient}, ...}}

local now, org = tonumber(ARGV[1]), ARGV[2]
local quota, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local level = bucketLevel(KEYS[1], quota, period, now)

local refusals = {}
local minute = math.floor(now / 60000)
for m = minute - tonumber(ARGV[5]) + 1, minute do
  local c = redis.call('HMGET', key('refusals', org, m), 'quota', 'ip', 'recipient')
  refusals[#refusals + 1] = {m * 60000, tonumber(c[1] or 0), tonumber(c[2] or 0), tonumber(c[3] or 0)}
end

return {math.floor(level / period), math.ceil((quota * period - level) / quota), refusals}
