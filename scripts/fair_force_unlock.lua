-- Delete a fair lock whoever holds it, and wake the head waiter.
-- KEYS[1..3]  the lock hash, queue and deadlines (see fair_common.lua)
-- KEYS[4]     the latch key of this request (same hash slot)
-- ARGV[1]     the message to publish
-- ARGV[2]     latch lifetime in milliseconds
-- ARGV[3]     the lock's channel; waiter w listens on ARGV[3] .. ':' .. w
-- Reply:      1 if a lock was deleted (by this request, possibly on an
--             earlier delivery of it), 0 if there was none.
if redis.call('EXISTS', KEYS[4]) == 1 then
  return 1
end
if redis.call('DEL', KEYS[1]) == 1 then
  wake(ARGV[3], prune(now_ms()), ARGV[1])
  redis.call('SET', KEYS[4], '1', 'PX', ARGV[2])
  return 1
end
return 0
