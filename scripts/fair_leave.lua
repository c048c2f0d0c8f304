-- Leave a fair lock's queue (a waiter that gives up). Uses the preludes
-- publish.lua and fair_common.lua. As a Redisson tryLock that gives up,
-- the leaver subtracts its thread wait time W from the scores of the
-- waiters behind it (they had each added it, through the tail, when they
-- joined). If the leaver was first in line, the next live waiter is woken,
-- since it is now first (see wake in fair_common.lua): when the lock is
-- free nobody else would tell it that its turn has come, and when it is
-- held it learns the holder's TTL.
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     rlock waiters' liveness hash (see fair_common.lua)
-- ARGV[1]     owner field
-- ARGV[2]     the message to publish
-- ARGV[3]     the lock's channel; waiter w listens on ARGV[3] .. ':' .. w
-- ARGV[4]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[5]     thread wait time W in milliseconds; default 300000
-- Reply:      1 if the owner was queued, 0 if not. Leaving twice is harmless.
local pos = redis.call('LPOS', KEYS[2], ARGV[1])
local queued = redis.call('ZSCORE', KEYS[3], ARGV[1]) and 1 or 0
if pos then
  shift(pos + 1, tonumber(ARGV[5]) or 300000)
end
forget(ARGV[1])
if pos == 0 then
  wake(ARGV[3], prune(ARGV[3], ARGV[2], ARGV[4]), ARGV[2], ARGV[4])
end
return queued
