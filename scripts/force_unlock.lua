-- Delete a lock whoever holds it, and wake its waiters. Uses the preludes
-- holds.lua and publish.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's unlock channel
-- KEYS[3]  the latch key of this request (same hash slot as KEYS[1])
-- ARGV[1]  the message to publish
-- ARGV[2]  latch lifetime in milliseconds
-- ARGV[3]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[4]  optional: the holders the caller expects, as their owner fields
--          sorted and joined with newlines; the lock is deleted only if
--          exactly they hold it
-- Reply:   1 if the lock was deleted, 0 if there was none, -1 if it is held
--          by others than ARGV[4] (nothing changed).
--
-- The outcome is recorded in the latch whatever it was, and a re-sent
-- request answers from it: a re-send after another owner took the lock
-- must not delete that owner's lock.

local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
local outcome = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  outcome = -1
  if not ARGV[4] or holders_are(KEYS[1], ARGV[4]) then
    outcome = redis.call('DEL', KEYS[1])
  end
end
if outcome == 1 then
  notify(KEYS[2], ARGV[1], ARGV[3])
end
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])
return outcome
