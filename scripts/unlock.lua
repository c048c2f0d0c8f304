-- Release one hold of a reentrant lock.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's unlock channel
-- KEYS[3]  the latch key of this request (same hash slot as KEYS[1])
-- ARGV[1]  lease in milliseconds, restored while holds remain
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count as the client last saw it
-- ARGV[4]  the message to publish on the last release
-- ARGV[5]  latch lifetime in milliseconds
-- Reply:   {1, 0}      released: that was the last hold; key deleted, message published
--          {0, holds}  still held, with holds left
--          {-1, 0}     not held by this owner; nothing changed
--
-- Replays are answered without a second effect: the last release leaves a
-- short-lived latch keyed by the request, and a decrement that already ran
-- shows as a stored count one below the client's count.
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0') or 0
if held <= 0 then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    return {1, 0} -- this request released the lock already
  end
  return {-1, 0}
end
if held == tonumber(ARGV[3]) - 1 then
  -- this request's decrement already ran
elseif held > 1 then
  held = redis.call('HINCRBY', KEYS[1], ARGV[2], -1)
else
  held = 0
end
if held > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {0, held}
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], ARGV[4])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
return {1, 0}
