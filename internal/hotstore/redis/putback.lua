-- Puts back messages the hot store lost, as the records keep them (named so because RESTORE
-- is a Redis command). A message that is here is left alone. One with a kept ack takes its
-- outcome: delivered, bounced or rejected (final: only the records writer has still to write it), or
-- deferred (back at the tail of its organization's queue, a retry). Any other goes back at the head of its organization's queue in its lane.
-- KEYS[1] the outbox (the {mail} slot)  ARGV[1] now  ARGV[2..] one message each, as JSON:
-- {id, orgId, lane, from, to, toMailbox, subject, tags, attempts, createdMs, payload, events: [{status, atMs, detail}],
-- tries: [try as JSON, ...]}
-- Reply: {put back in a lane, put back final}

local now = tonumber(ARGV[1])
local requeued, finished = 0, 0
for i = 2, #ARGV do
  local m = cjson.decode(ARGV[i])
  local org, id = m.orgId, m.id
  local message = key('message', org, id)
  if redis.call('EXISTS', message) == 0 then
    local events = key('events', org, id)
    redis.call('DEL', events)
    for _, e in ipairs(m.events) do
      redis.call('RPUSH', events, e.status .. '|' .. e.atMs .. '|' .. e.detail)
    end
    local tries = key('attempts', org, id)
    redis.call('DEL', tries)
    for _, t in ipairs(m.tries) do redis.call('RPUSH', tries, t) end
    redis.call('HSET', message, 'lane', m.lane, 'payload', m.payload, 'mailbox', m.toMailbox, 'from', m.from,
      'to', m.to, 'subject', m.subject, 'tags', m.tags, 'attempts', m.attempts, 'created', m.createdMs, 'updated', now,
      'lease', '', 'v', #m.events)
    countHeld(org, message, #m.payload)
    local status, detail, head = S.QUEUED, 'restored from the records; back in its lane', true
    local kept = key('keptAck', org, id)
    local ack = redis.call('GET', kept)
    if ack then
      redis.call('DEL', kept)
      local outcome, said = string.match(ack, '^(%d+)|(.*)$')
      detail = said
      if outcome == '1' then status = S.DELIVERED
      elseif outcome == '2' then status = S.BOUNCED
      elseif outcome == '4' then status = S.FAILED
      else head = false end
    end
    redis.call('HSET', message, 'status', status)
    record(org, id, status, now, detail)
    if status == S.QUEUED then
      local queue = key('orgQueue', m.lane, org)
      local len = head and redis.call('LPUSH', queue, id) or redis.call('RPUSH', queue, id)
      if len == 1 then redis.call('RPUSH', key('roster', m.lane), org) end
      if redis.call('INCR', key('depth', m.lane)) == 1 then signalWaiting(m.lane) end
      requeued = requeued + 1
    else
      finished = finished + 1
    end
  end
end
return {requeued, finished}
