-- Leave a fair lock's queue (a waiter that gives up). If the leaver was
-- first in line, the next live waiter is woken, since it is now first (see
-- wake in fair_common.lua): when the lock is free nobody else would tell
-- it that its turn has come, and when it is held it learns the holder's
-- TTL.
-- KEYS[1..3]  the lock hash, queue and deadlines (see fair_common.lua)
-- ARGV[1]     owner field
-- ARGV[2]     the message to publish
-- ARGV[3]     the lock's channel; waiter w listens on ARGV[3] .. ':' .. w
-- ARGV[4]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- Reply:      1 if the owner was queued, 0 if not. Leaving twice is harmless.
local first = redis.call('LINDEX', KEYS[2], 0) == ARGV[1]
redis.call('LREM', KEYS[2], 0, ARGV[1])
local queued = redis.call('ZREM', KEYS[3], ARGV[1])
if first then
  wake(ARGV[3], prune(now_ms()), ARGV[2], ARGV[4])
end
return queued
