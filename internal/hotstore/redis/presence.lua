-- What the hot store has of each message: 'here', 'missing', or 'acked' (the message is gone,
-- but a worker's ack of it was kept).
-- KEYS[1] the outbox (the {mail} slot)  ARGV: org id, message id, ... (pairs)
-- Reply: one word per message.

local out = {}
for i = 1, #ARGV, 2 do
  local org, id = ARGV[i], ARGV[i + 1]
  if redis.call('EXISTS', key('message', org, id)) == 1 then
    out[#out + 1] = 'here'
  elseif redis.call('EXISTS', key('keptAck', org, id)) == 1 then
    out[#out + 1] = 'acked'
  else
    out[#out + 1] = 'missing'
  end
end
return out
