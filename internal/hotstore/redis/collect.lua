-- Reads the messages that changed since they were last written to the records, oldest change
-- first, each not yet final with its payload (the records keep it until the message is final).
-- An outbox entry whose message is gone is dropped.
-- KEYS[1] the outbox  ARGV[1] at most this many
-- Reply: a list of messages as readMessage gives them, the payload after the events.

local out = {}
for _, entry in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  local org, id = unref(entry)
  local m = readMessage(org, id)
  if m then
    if not isFinal(m[8]) then m[14] = redis.call('HGET', key('message', org, id), 'payload') end
    out[#out + 1] = m
  else redis.call('ZREM', KEYS[1], entry) end
end
return out
