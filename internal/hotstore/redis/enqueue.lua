-- The accept step of a send, atomic: idempotency, the verified sending domain, the recipient
-- guards, the record and the enqueue. A refused send records nothing (pruning entries older
-- than the long window is not a record). The domain's state comes from the organization's
-- projection, read just before (it lives in the organization's slot, not in {mail}).
--
-- KEYS[1] idempotency record  KEYS[2] guard log of (org, mailbox)  KEYS[3] the mailbox's cooldown
-- KEYS[4] message  KEYS[5] its events  KEYS[6] the org's queue in the lane  KEYS[7] the lane's roster
-- KEYS[8] lane depth  KEYS[9] the organization's holdings
-- ARGV[1] now  ARGV[2] message id  ARGV[3] org id  ARGV[4] lane  ARGV[5] payload  ARGV[6] mailbox
-- ARGV[7] check cooldown (1/0)  ARGV[8] count guards (1/0)  ARGV[9] body hash ('' without a key)
-- ARGV[10] idempotency TTL ms  ARGV[11] short max  ARGV[12] short window ms  ARGV[13] long max
-- ARGV[14] long window ms  ARGV[15] the From domain in the projection: 'verified', 'unverified',
-- or 'miss' (no projection of the organization)  ARGV[16] From  ARGV[17] To  ARGV[18] subject
-- ARGV[19] tags, space-separated  ARGV[20] the most messages an organization may hold
-- ARGV[21] the most payload bytes it may hold
--
-- Reply: {'accepted', id} | {'replayed', id} | {'conflict'} | {'domain_not_verified'} | {'miss'}
--      | {'limited', reason, retry ms} | {'queue_full', 'messages' | 'bytes'}

local now = tonumber(ARGV[1])

if ARGV[9] ~= '' then
  -- The record's own expiry is compared with now (the daemon's clock); the key's TTL only cleans up.
  local prev = redis.call('HMGET', KEYS[1], 'h', 'id', 'e')
  if prev[1] and tonumber(prev[3]) > now then
    if prev[1] == ARGV[9] then
      -- A write, so that the WAIT after this script covers the first accept too, whichever
      -- connection made it: a replay answers 202 only once the message survives its primary.
      redis.call('HSET', KEYS[1], 'r', now)
      return {'replayed', prev[2]}
    end
    return {'conflict'}
  end
end

if ARGV[15] == 'miss' then return {'miss'} end
if ARGV[15] ~= 'verified' then return {'domain_not_verified'} end

local held = redis.call('HMGET', KEYS[9], 'n', 'b')
if tonumber(held[1] or '0') + 1 > tonumber(ARGV[20]) then return {'queue_full', 'messages'} end
if tonumber(held[2] or '0') + #ARGV[5] > tonumber(ARGV[21]) then return {'queue_full', 'bytes'} end

local retry, reason = 0, ''
if ARGV[7] == '1' then
  local untilMs = tonumber(redis.call('GET', KEYS[3]) or '0')
  if untilMs > now then retry, reason = untilMs - now, 'bounce_cooldown' end
end

if ARGV[8] == '1' then
  local shortMax, shortWin = tonumber(ARGV[11]), tonumber(ARGV[12])
  local longMax, longWin = tonumber(ARGV[13]), tonumber(ARGV[14])
  -- An accept at t counts while now < t + window.
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - longWin)
  local recent = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. (now - shortWin), '+inf', 'WITHSCORES')
  local n = #recent / 2
  if n >= shortMax then
    -- The (n - shortMax + 1)-th oldest recent accept must leave the window.
    -- At most the window: an accept stamped a few ms after this call's now (calls are stamped
    -- before they reach Redis, so they can run out of order) must not ask for 600.003 s.
    local wait = math.min(shortWin, tonumber(recent[(n - shortMax + 1) * 2]) + shortWin - now)
    if wait > retry then retry, reason = wait, 'short_window' end
  end
  local total = redis.call('ZCARD', KEYS[2])
  if total >= longMax then
    local e = redis.call('ZRANGE', KEYS[2], total - longMax, total - longMax, 'WITHSCORES')
    local wait = math.min(longWin, tonumber(e[2]) + longWin - now)
    if wait > retry then retry, reason = wait, 'long_window' end
  end
end

if retry > 0 then return {'limited', reason, retry} end

if ARGV[8] == '1' then
  redis.call('ZADD', KEYS[2], now, ARGV[2])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[14]))
end
redis.call('HSET', KEYS[4], 'lane', ARGV[4], 'payload', ARGV[5], 'mailbox', ARGV[6], 'from', ARGV[16], 'to', ARGV[17],
  'subject', ARGV[18], 'tags', ARGV[19], 'status', S.QUEUED, 'attempts', 0, 'created', now, 'updated', now, 'lease', '', 'v', 0)
record(ARGV[3], ARGV[2], S.QUEUED, now, 'accepted')
countHeld(ARGV[3], KEYS[4], #ARGV[5])
if redis.call('RPUSH', KEYS[6], ARGV[2]) == 1 then redis.call('RPUSH', KEYS[7], ARGV[3]) end
if redis.call('INCR', KEYS[8]) == 1 then signalWaiting(ARGV[4]) end
if ARGV[9] ~= '' then
  redis.call('HSET', KEYS[1], 'h', ARGV[9], 'id', ARGV[2], 'e', now + tonumber(ARGV[10]))
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[10]))
end
return {'accepted', ARGV[2]}
