-- Delete a fair lock whoever holds it, and wake the head waiter. Uses the
-- preludes holds.lua, publish.lua and fair_common.lua.
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     the latch key of this request (same hash slot)
-- KEYS[5]     rlock waiters' liveness hash (see fair_common.lua)
-- ARGV[1]     the message to publish
-- ARGV[2]     latch lifetime in milliseconds
-- ARGV[3]     the lock's channel; waiter w listens on ARGV[3] .. ':' .. w
-- ARGV[4]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[5]     optional: the holders the caller expects (see force_unlock.lua)
-- Reply:      1 if the lock was deleted, 0 if there was none, -1 if it is
--             held by others than ARGV[5] (nothing changed).
--
-- The outcome is recorded in the latch whatever it was, and a re-sent
-- request answers from it: a re-send after another owner took the lock
-- must not delete that owner's lock.

local done = redis.call('GET', KEYS[4])
if done then
  return tonumber(done)
end
local outcome = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  outcome = -1
  if not ARGV[5] or holders_are(KEYS[1], ARGV[5]) then
    outcome = redis.call('DEL', KEYS[1])
  end
end
if outcome == 1 then
  wake(ARGV[3], prune(ARGV[3], ARGV[1], ARGV[4]), ARGV[1], ARGV[4])
end
redis.call('SET', KEYS[4], outcome, 'PX', ARGV[2])
return outcome
