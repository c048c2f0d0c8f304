-- Acquire one hold of a reentrant lock (Redisson RLock layout).
-- KEYS[1]  the lock hash; field = owner, value = hold count
-- KEYS[2]  the lock's fencing token counter (same hash slot)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<clientID>:<ownerID>"
-- ARGV[3]  the owner's hold count as the client last saw it (0 if none)
-- ARGV[4]  "1" to issue fencing tokens, "0" not to (KEYS[2] is then untouched)
-- Reply:   {1, holds, token}  acquired; holds = the owner's hold count now;
--                             token = the holding period's fencing token (0 without fencing)
--          {0, pttl}          held by another owner; pttl as PTTL reports it
--          {-1, 0}            the owner's holds are gone (ARGV[3] > 0 but no
--                             field): lost, never passed off as a re-entry
--
-- A command whose reply was lost may be sent again by the client library.
-- The client serialises one owner's operations on one lock, so when the
-- stored count is one more than the client's count, this request has
-- already been applied: it is answered again without a second increment.
local function token(grant)
  if ARGV[4] ~= '1' then
    return 0
  end
  if grant then
    return redis.call('INCR', KEYS[2])
  end
  return tonumber(redis.call('GET', KEYS[2]) or '0') or 0
end
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0') or 0
if held == 0 and tonumber(ARGV[3]) > 0 then
  return {-1, 0}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {1, 1, token(true)}
end
if held > 0 then
  if held ~= tonumber(ARGV[3]) + 1 then
    held = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {1, held, token(false)}
end
return {0, redis.call('PTTL', KEYS[1])}
