-- Keeps a worker's ack that changed nothing (its lease was not current, or its message is not
-- here) for the reconciliation: that message was delivered (or bounced, or deferred) and must
-- not be delivered again. A script, so that it goes through the confirmed writes as the ack does.
-- KEYS[1] the kept ack  ARGV[1] 'outcome|detail'  ARGV[2] ttl ms
-- Reply: 1.

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
