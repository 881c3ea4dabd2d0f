-- Marks messages as written to the records (and their payload as kept there). A message that
-- changed since it was read stays in the outbox; one that did not leaves it, and leaves the hot
-- store too when it is final.
-- KEYS[1] the outbox  ARGV: org id, message id, version written, ... (triples)
-- Reply: how many messages left the hot store.

local gone = 0
for i = 1, #ARGV, 3 do
  local org, id = ARGV[i], ARGV[i + 1]
  local m = key('message', org, id)
  local fields = redis.call('HMGET', m, 'v', 'status')
  -- The records have its payload now (written with the first batch that had the message).
  if fields[1] then redis.call('HSET', m, 'pw', 1) end
  if fields[1] == ARGV[i + 2] then
    redis.call('ZREM', KEYS[1], ref(org, id))
    if isFinal(tonumber(fields[2])) then
      uncountHeld(org, m)
      redis.call('DEL', m, key('events', org, id), key('attempts', org, id))
      gone = gone + 1
    end
  end
end
return gone
