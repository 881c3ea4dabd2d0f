-- The one definition of the Redis key layout, the record formats and the status codes. Every
-- script is loaded with this prelude in front of it, and the TypeScript side (layout.ts) reads
-- the K, S and V lines below: nothing here is spelled a second time.
--
-- Hash slots (Redis Cluster): a token, an organization and a client IP each have a slot of
-- their own; the mail pipeline (idempotency, guards, cooldowns, messages, lanes, the outbox)
-- shares the one slot {mail}, so that every script touches one slot. The lanes release 80
-- messages a second in all, which one node serves; admission, the hot path, spreads over the
-- cluster by IP and organization.

local K = {}
K.token = 'mc:tok:{%s}'                   -- token hash -> org id, or '' (not a valid token, expires)
K.org = 'mc:org:{%s}'                     -- projection: slug, plan, v (version), a (audience stamp), d:<verified domain>
K.orgBucket = 'mc:org:{%s}:bucket'        -- the organization's request bucket: 'level:ms'
K.ipBucket = 'mc:ip:{%s}:bucket'          -- a client IP's request bucket: 'level:ms'
K.lease = 'mc:lease:{%s}'                 -- who runs a singleton: a lane's scheduler, the history writer
K.idempotency = 'mc:{mail}:idem:%s:%s'    -- (org, key hash): h (body hash), id, e (expiry ms), r (last replay ms)
K.guardLog = 'mc:{mail}:g:%s:%s'          -- (org, mailbox): zset of accept times
K.cooldown = 'mc:{mail}:cd:%s'            -- a mailbox's bounce cooldown: until ms
K.message = 'mc:{mail}:m:%s:%s'           -- (org, id): a message not yet settled in the records (q: counted in its org's held)
K.events = 'mc:{mail}:m:%s:%s:ev'         -- its events: 'status|at ms|detail'
K.attempts = 'mc:{mail}:m:%s:%s:at'       -- its tries at receivers: one JSON object each, as the worker reported them
K.orgQueue = 'mc:{mail}:q:%s:%s'          -- (lane, org): the organization's waiting messages
K.roster = 'mc:{mail}:roster:%s'          -- organizations with waiting messages, in serving order
K.ready = 'mc:{mail}:ready:%s'            -- released messages ('org|id'), waiting for a worker
K.depth = 'mc:{mail}:depth:%s'            -- how many messages wait in the lane
K.slots = 'mc:{mail}:slots:%s'            -- (lane): the run of the lane's last slot: start (wall ms), k, rate
K.inFlight = 'mc:{mail}:inflight:%s'      -- zset: leased 'org|id' -> lease expiry
K.deferred = 'mc:{mail}:deferred:%s'      -- zset: 'org|id' -> retry time
K.outbox = 'mc:{mail}:outbox'             -- zset: 'org|id' changed since last written to the records
K.keptAck = 'mc:{mail}:acked:%s:%s'       -- (org, id): 'outcome|detail', a worker's ack of a message no longer here
K.held = 'mc:{mail}:held:%s'              -- (org): n (its messages here, not yet settled as final), b (their payloads' bytes)
K.refusals = 'mc:org:{%s}:429:%s'         -- (org, minute number): refused requests: quota, ip, recipient
K.sending = 'mc:org:{%s}:sending'         -- (org): its suppression list (mailbox -> reason), '~bulk' (why its bulk sends are paused), '~loaded' (rebuilt from the records)
K.released = 'mc:{mail}:rel:%s:%s'        -- (org, second number): messages released, a count per lane
K.laneHolds = 'mc:{mail}:holds:%s'       -- (lane): set of organizations held in the lane (bulk paused): skipped by release
K.signals = 'mc:{mail}:signals'           -- pub/sub channel: 'w<lane>' a lane got a message waiting, 'r' one was released

-- Wakes the daemons' idle lane schedulers: a lane that was empty has a message waiting.
local function signalWaiting(lane)
  redis.call('PUBLISH', K.signals, 'w' .. lane)
end

-- How long the per-second release counts are kept (ms): longer than the window usage_lanes.lua reads.
local RELEASED_KEEP_MS = 20000

-- Message statuses (proto MessageStatus).
local S = {}
S.QUEUED = 1
S.SENDING = 2
S.DELIVERED = 3
S.DEFERRED = 4
S.BOUNCED = 5
S.FAILED = 6
S.DELAYED = 7 -- an event only: still not delivered hours after the first attempt

-- Admission verdicts (proto Verdict; MISS: the projection has no entry, nothing consumed).
local V = {}
V.MISS = 0
V.ALLOWED = 1
V.UNAUTHENTICATED = 2
V.ORG_LIMITED = 3
V.IP_LIMITED = 4

local function key(name, ...)
  return string.format(K[name], ...)
end

-- How lane-wide lists and sets name a message.
local function ref(org, id)
  return org .. '|' .. id
end

local function unref(entry)
  return string.match(entry, '^(.-)|(.*)$')
end

-- A message comes into the hot store: its organization's holdings, which the queue cap reads,
-- count it, and the message says so (q), so that only what was counted is taken off again.
local function countHeld(org, message, bytes)
  redis.call('HSET', message, 'q', 1)
  local k = key('held', org)
  redis.call('HINCRBY', k, 'n', 1)
  redis.call('HINCRBY', k, 'b', bytes)
end

-- A message leaves the hot store: taken off its organization's holdings when it was counted. A
-- key of nothing held is removed.
local function uncountHeld(org, message)
  if not redis.call('HGET', message, 'q') then return end
  local k = key('held', org)
  if redis.call('HINCRBY', k, 'n', -1) <= 0 then
    redis.call('DEL', k)
  else
    redis.call('HINCRBY', k, 'b', -redis.call('HSTRLEN', message, 'payload'))
  end
end

local function isFinal(status)
  return status == S.DELIVERED or status == S.BOUNCED or status == S.FAILED
end

-- Appends an event to a message and marks the message changed for the records.
local function record(org, id, status, now, detail)
  redis.call('RPUSH', key('events', org, id), status .. '|' .. now .. '|' .. detail)
  redis.call('HINCRBY', key('message', org, id), 'v', 1)
  redis.call('ZADD', key('outbox'), 'NX', now, ref(org, id))
end

-- A message as the records keep it: {id, org, lane, from, to, mailbox, subject, status,
-- attempts, created, updated, v, {{status, at, detail}, ...}, tags, {try as JSON, ...}}; nil
-- when it is not here. tags is space-separated ('' for a message accepted before messages kept
-- their tags).
local function readMessage(org, id)
  local m = redis.call('HMGET', key('message', org, id), 'lane', 'from', 'to', 'mailbox', 'subject', 'status', 'attempts', 'created', 'updated', 'v', 'tags')
  if not m[1] then return nil end
  local events = {}
  for _, e in ipairs(redis.call('LRANGE', key('events', org, id), 0, -1)) do
    local status, at, detail = string.match(e, '^(%d+)|(%d+)|(.*)$')
    events[#events + 1] = {tonumber(status), tonumber(at), detail}
  end
  local tries = redis.call('LRANGE', key('attempts', org, id), 0, -1)
  return {id, org, tonumber(m[1]), m[2], m[3], m[4], m[5], tonumber(m[6]), tonumber(m[7]), tonumber(m[8]), tonumber(m[9]), tonumber(m[10]), events, m[11] or '', tries}
end

-- Token buckets in integer units of 1/period of a token (internal/bucket mirrors this):
-- the level after refilling up to now, and the time it counts from. A bucket is one string,
-- 'level:ms', written with its expiry in one SET: an admission's two buckets cost two commands
-- to read and two to write (as hashes, HSET and PEXPIRE took four to write).
local function bucketLevel(bucket, quota, period, now)
  local s = redis.call('GET', bucket)
  local capacity = quota * period
  if not s then return capacity, now end
  local sep = string.find(s, ':', 1, true)
  local at = tonumber(string.sub(s, sep + 1))
  local l = tonumber(string.sub(s, 1, sep - 1)) + math.max(0, now - at) * quota
  if l > capacity then l = capacity end
  return l, math.max(now, at)
end

-- Saves a bucket; the key expires when the bucket would be full again (a missing bucket is full).
local function bucketSave(bucket, l, at, quota, period)
  redis.call('SET', bucket, string.format('%d:%d', l, at), 'PX', math.ceil((quota * period - l) / quota) + 1000)
end

-- The organization's side of an admission: its projection and its bucket. With take, one request
-- is taken when the bucket has it (ALLOWED) or refused (ORG_LIMITED); without, the bucket is only
-- reported, under IP_LIMITED. MISS when the organization is not projected. quotas[plan] is each
-- plan's quota. Reply: {verdict, plan, slug, remaining, ms to full, retry-after ms, audience stamp}.
local function admitOrg(projection, bucket, now, period, quotas, take)
  local org = redis.call('HMGET', projection, 'plan', 'slug', 'a')
  if not org[1] then return {V.MISS, 0, '', 0, 0, 0} end
  local plan = tonumber(org[1])
  local quota = tonumber(quotas[plan])
  local l, at = bucketLevel(bucket, quota, period, now)
  local function reply(verdict, level, retry)
    return {verdict, plan, org[2], math.floor(level / period), math.ceil((quota * period - level) / quota), retry, org[3] or ''}
  end
  if not take then return reply(V.IP_LIMITED, l, 0) end
  if l < period then return reply(V.ORG_LIMITED, l, math.ceil((period - l) / quota)) end
  bucketSave(bucket, l - period, at, quota, period)
  return reply(V.ALLOWED, l - period, 0)
end

-- Each script follows.
