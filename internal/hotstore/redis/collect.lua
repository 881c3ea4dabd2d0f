-- Reads the messages that changed since they were last written to the records, oldest change
-- first. An outbox entry whose message is gone is dropped.
-- KEYS[1] the outbox  ARGV[1] at most this many
-- Reply: a list of messages as readMessage gives them.

local out = {}
for _, entry in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  local org, id = unref(entry)
  local m = readMessage(org, id)
  if m then out[#out + 1] = m else redis.call('ZREM', KEYS[1], entry) end
end
return out
