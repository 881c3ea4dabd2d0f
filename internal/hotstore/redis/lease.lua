-- Leases released messages to a worker, transactional first: each leased message is marked
-- sending, its attempt counted, and kept in the lane's in-flight set until its visibility
-- deadline.
--
-- KEYS[1] ready (transactional)  KEYS[2] ready (bulk)
-- KEYS[3] in flight (transactional)  KEYS[4] in flight (bulk)
-- ARGV[1] now  ARGV[2] max  ARGV[3] visibility ms  ARGV[4] lease id prefix
-- Reply: {{lease id, message id, org, lane, payload, attempt, slot or nil}, ...}

local now, max, vis = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 1, 2 do
  while #out < max do
    local entry = redis.call('LPOP', KEYS[i])
    if not entry then break end
    local org, id = unref(entry)
    local m = key('message', org, id)
    if redis.call('EXISTS', m) == 1 then
      local lease = ARGV[4] .. '.' .. #out
      local attempt = redis.call('HINCRBY', m, 'attempts', 1)
      redis.call('HSET', m, 'status', S.SENDING, 'lease', lease, 'updated', ARGV[1])
      record(org, id, S.SENDING, ARGV[1], 'attempt ' .. attempt)
      redis.call('ZADD', KEYS[2 + i], now + vis, entry)
      local fields = redis.call('HMGET', m, 'lane', 'payload', 'slot')
      out[#out + 1] = {lease, id, org, fields[1], fields[2], attempt, fields[3]}
    end
  end
end
return out
