-- Acquire one hold of a reentrant lock (Redisson RLock layout). Uses the
-- prelude holds.lua.
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
local believed = tonumber(ARGV[3]) > 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  if believed then
    return {-1, 0}
  end
  grant(KEYS[1], ARGV[2], ARGV[1])
  return {1, 1, fencing_token(KEYS[2], ARGV[4], true)}
end
local held = holds_of(KEYS[1], ARGV[2])
if held > 0 then
  return {1, reenter(KEYS[1], ARGV[2], held, ARGV[3], ARGV[1]), fencing_token(KEYS[2], ARGV[4], false)}
end
if believed then
  return {-1, 0}
end
return {0, redis.call('PTTL', KEYS[1])}
