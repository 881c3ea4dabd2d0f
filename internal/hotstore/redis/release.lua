-- Releases a lane's next messages, each stamped with its slot (the time it may leave): the
-- organization at the head of the roster gives its oldest message, and goes to the back of the
-- roster if it has more (round-robin). An organization is on the roster exactly while its queue
-- in the lane is not empty. As many messages are released as have a slot by ARGV[4], at most
-- ARGV[5].
--
-- A lane's slots come in runs: a run starts when a message finds the lane idle or behind, and its
-- k-th slot is its start plus floor(k * 1000 / rate) ms. The lane's slots hash keeps the run of
-- the last slot given (start, k, rate). The same rule as nextSlot in hotstore.ts:
-- a run starts again now when its next slot has passed or lies further ahead than a call's
-- reach (the wall clock stepped back); a rate that changed continues from the last slot.
--
-- An organization held in the lane (its bulk sends paused, hold_lane.lua) leaves the roster when
-- it comes to the head, and gives nothing: its queue stays as it is, and the slot goes to the
-- next organization (a slot is given only with a message, so none is lost or saved up).
--
-- KEYS[1] the lane's roster  KEYS[2] the lane's ready list  KEYS[3] lane depth  KEYS[4] the lane's slots  KEYS[5] the lane's held organizations
-- ARGV[1] now  ARGV[2] lane  ARGV[3] rate  ARGV[4] the latest slot to give  ARGV[5] the most to release
-- Reply: {{{org, message id, slot}, ...}, the next slot or -1 when the lane is empty}
-- The organization's queue and message keys are derived here from the prelude's layout.

local now, rate, untilMs, max = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local saved = redis.call('HMGET', KEYS[4], 'start', 'k', 'rate')
local start, k, runRate = tonumber(saved[1]), tonumber(saved[2]), tonumber(saved[3])

local function slotAt(i)
  return start + math.floor(i * 1000 / runRate)
end

-- Moves to the run's next slot, or starts a run now.
local function advance()
  if start and runRate ~= rate then
    start, k, runRate = slotAt(k), 0, rate
  end
  if start then
    local at = slotAt(k + 1)
    if at >= now and at <= untilMs + 1000 + math.ceil(1000 / rate) then
      k = k + 1
      return
    end
  end
  start, k, runRate = now, 0, rate
end

advance()
local out = {}
while true do
  local org = redis.call('LINDEX', KEYS[1], 0)
  if not org then return {out, -1} end
  local queue = key('orgQueue', ARGV[2], org)
  local id = redis.call('LINDEX', queue, 0)
  if not id or redis.call('SISMEMBER', KEYS[5], org) == 1 then
    redis.call('LPOP', KEYS[1]) -- an organization with nothing left, or held: off the roster
  else
    local slot = slotAt(k)
    if #out >= max or slot > untilMs then return {out, slot} end
    redis.call('LPOP', KEYS[1])
    redis.call('LPOP', queue)
    if redis.call('LLEN', queue) > 0 then redis.call('RPUSH', KEYS[1], org) end
    redis.call('DECR', KEYS[3])
    redis.call('HSET', KEYS[4], 'start', start, 'k', k, 'rate', runRate)
    redis.call('HSET', key('message', org, id), 'slot', slot)
    -- The ready list was empty: wake the daemons' idle lease streams.
    if redis.call('RPUSH', KEYS[2], ref(org, id)) == 1 then redis.call('PUBLISH', K.signals, 'r') end
    record(org, id, S.QUEUED, ARGV[1], 'released')
    -- The organization's release rate, for the console: counted in the second of the slot.
    local counted = key('released', org, math.floor(slot / 1000))
    redis.call('HINCRBY', counted, ARGV[2], 1)
    redis.call('PEXPIRE', counted, RELEASED_KEEP_MS)
    out[#out + 1] = {org, id, slot}
    advance()
  end
end
