-- Reads the messages that changed since they were last written to the records, oldest change
-- first. One not yet final whose payload the records do not have yet (no 'pw', set by settle)
-- comes with it: the records keep it until the message is final. The payloads of one batch stop
-- at a budget, past its first message. An outbox entry whose message is gone is dropped.
-- KEYS[1] the outbox  ARGV[1] at most this many  ARGV[2] the payloads' budget (bytes)
-- Reply: a list of messages as readMessage gives them, the payload (if any) after the events.

local out, bytes, budget = {}, 0, tonumber(ARGV[2])
for _, entry in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  local org, id = unref(entry)
  local m = readMessage(org, id)
  if m then
    if not isFinal(m[8]) then
      local fields = redis.call('HMGET', key('message', org, id), 'pw', 'payload')
      if not fields[1] then
        if #out > 0 and bytes + #fields[2] > budget then break end
        bytes = bytes + #fields[2]
        m[16] = fields[2]
      end
    end
    out[#out + 1] = m
  else redis.call('ZREM', KEYS[1], entry) end
end
return out
