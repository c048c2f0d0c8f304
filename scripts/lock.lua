-- Acquire one hold of a reentrant lock (Redisson RLock layout). Uses the
-- preludes holds.lua, clock.lua, publish.lua and designate.lua, which go
-- after the fast path (at the preludes line).
-- KEYS[1]  the lock hash; field = owner, value = hold count
-- KEYS[2]  the lock's fencing token counter (same hash slot)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<clientID>:<ownerID>"
-- ARGV[3]  the owner's hold count as the client last saw it (0 if none)
-- ARGV[4]  "1" to issue fencing tokens, "0" not to (KEYS[2] is then untouched)
-- ARGV[5]  the client's tag when a waiting Lock call sends it ("" or
--          absent for any other call: KEYS[3] is then untouched)
-- ARGV[6]  "1" if the client has other calls waiting for this lock; "-"
--          if not, and the client has no registration for a grant to take
--          out (it has no channel for the lock: see core.registration);
--          "0" otherwise
-- ARGV[7]  the client's longest wait between attempts on a lock without
--          expiry, in milliseconds
-- Reply:   {1, holds, token}  acquired; holds = the owner's hold count now;
--                             token = the holding period's fencing token (0 without fencing)
--          1                  the fast path's grant: {1, 1, 0} (see lua.AcquireReply)
--          {0, pttl}          held by another owner; pttl as PTTL reports it
--          {-1, 0}            the owner's holds are gone (ARGV[3] > 0 but no
--                             field): lost, never passed off as a re-entry
--
-- The fast path: a free lock taken by a new owner whose client has no
-- other call waiting for it (ARGV[6] is not "1"), before the preludes are
-- defined below (see lua.preludesHere): the first branch below, inlined.
if ARGV[6] ~= '1' and tonumber(ARGV[3]) == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  if ARGV[5] and ARGV[5] ~= '' and ARGV[6] ~= '-' then
    redis.call('ZREM', KEYS[3], ARGV[5])
  end
  if ARGV[4] == '1' then
    return {1, 1, redis.call('INCR', KEYS[2])}
  end
  return 1 -- {1, 1, 0}: a bare integer costs Redis less than a table
end
--@preludes

-- A waiting call's grant moves its client to the back of the registry when
-- it has other waiters (they were served least recently no more), and takes
-- it out otherwise, so that no release designates a client without waiters.
local function granted(registry, tag, others, lease, poll)
  if tag == '' then
    return
  elseif others == '1' then
    register(registry, tag, math.max(tonumber(lease), tonumber(poll)))
  else
    redis.call('ZREM', registry, tag)
  end
end

local tag = ARGV[5] or ''
local believed = tonumber(ARGV[3]) > 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  if believed then
    return {-1, 0}
  end
  grant(KEYS[1], ARGV[2], ARGV[1])
  granted(KEYS[3], tag, ARGV[6], ARGV[1], ARGV[7])
  return {1, 1, fencing_token(KEYS[2], ARGV[4], true)}
end
local held = holds_of(KEYS[1], ARGV[2])
if held > 0 then
  return {1, reenter(KEYS[1], ARGV[2], held, ARGV[3], ARGV[1]), fencing_token(KEYS[2], ARGV[4], false)}
end
if believed then
  return {-1, 0}
end
local pttl = redis.call('PTTL', KEYS[1])
if tag ~= '' then
  -- the waiting call tries again within pttl (or its longest poll)
  register(KEYS[3], tag, pttl >= 0 and pttl or ARGV[7])
end
return {0, pttl}
