-- Delete a fair lock whoever holds it, and wake the head waiter.
-- KEYS[1..3]  the lock hash, queue and deadlines (see fair_common.lua)
-- KEYS[4]     the latch key of this request (same hash slot)
-- ARGV[1]     the message to publish
-- ARGV[2]     latch lifetime in milliseconds
-- ARGV[3]     the lock's channel; waiter w listens on ARGV[3] .. ':' .. w
-- Reply:      1 if a lock was deleted, 0 if there was none.
--
-- The outcome is recorded in the latch whatever it was, and a re-sent
-- request answers from it (see force_unlock.lua).
local done = redis.call('GET', KEYS[4])
if done then
  return tonumber(done)
end
local deleted = redis.call('DEL', KEYS[1])
if deleted == 1 then
  wake(ARGV[3], prune(now_ms()), ARGV[1])
end
redis.call('SET', KEYS[4], deleted, 'PX', ARGV[2])
return deleted
