-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's unlock channel
-- KEYS[3]  the latch key of this request (same hash slot as KEYS[1])
-- ARGV[1]  the message to publish
-- ARGV[2]  latch lifetime in milliseconds
-- Reply:   1 if a lock was deleted (by this request, possibly on an earlier
--          delivery of it), 0 if there was none.
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 1
end
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('PUBLISH', KEYS[2], ARGV[1])
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
  return 1
end
return 0
