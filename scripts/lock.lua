-- Acquire one hold of a reentrant lock (Redisson RLock layout).
-- KEYS[1]  the lock hash; field = owner, value = hold count
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<clientID>:<ownerID>"
-- ARGV[3]  the owner's hold count as the client last saw it (0 if none)
-- Reply:   {1, holds}  acquired; holds = the owner's hold count now
--          {0, pttl}   held by another owner; pttl as PTTL reports it
--
-- A command whose reply was lost may be sent again by the client library.
-- The client serialises one owner's operations on one lock, so when the
-- stored count is one more than the client's count, this request has
-- already been applied: it is answered again without a second increment.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {1, 1}
end
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0') or 0
if held > 0 then
  if held ~= tonumber(ARGV[3]) + 1 then
    held = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {1, held}
end
return {0, redis.call('PTTL', KEYS[1])}
