-- Every message not yet final in the hot store, from the lanes: waiting in an organization's
-- queue, released, leased, deferred. Read only after a loss, or once a round of the
-- reconciliation: it reads the whole backlog.
-- KEYS[1] the outbox (the {mail} slot)  ARGV: the lanes
-- Reply: {{org, id, version}, ...}

local out = {}
local function add(org, id)
  local v = redis.call('HGET', key('message', org, id), 'v')
  if v then out[#out + 1] = {org, id, tonumber(v)} end
end
for _, lane in ipairs(ARGV) do
  for _, org in ipairs(redis.call('LRANGE', key('roster', lane), 0, -1)) do
    for _, id in ipairs(redis.call('LRANGE', key('orgQueue', lane, org), 0, -1)) do add(org, id) end
  end
  for _, entry in ipairs(redis.call('LRANGE', key('ready', lane), 0, -1)) do add(unref(entry)) end
  for _, set in ipairs({'inFlight', 'deferred'}) do
    for _, entry in ipairs(redis.call('ZRANGE', key(set, lane), 0, -1)) do add(unref(entry)) end
  end
end
return out
