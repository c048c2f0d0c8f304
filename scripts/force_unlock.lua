-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's unlock channel
-- KEYS[3]  the latch key of this request (same hash slot as KEYS[1])
-- ARGV[1]  the message to publish
-- ARGV[2]  latch lifetime in milliseconds
-- Reply:   1 if a lock was deleted, 0 if there was none.
--
-- The outcome is recorded in the latch whatever it was, and a re-sent
-- request answers from it: a re-send after another owner took the lock
-- must not delete that owner's lock.
local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
local deleted = redis.call('DEL', KEYS[1])
if deleted == 1 then
  redis.call('PUBLISH', KEYS[2], ARGV[1])
end
redis.call('SET', KEYS[3], deleted, 'PX', ARGV[2])
return deleted
