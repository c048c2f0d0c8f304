-- Release one hold of a reentrant lock. Uses the preludes holds.lua,
-- clock.lua, publish.lua and designate.lua, which go after the fast path
-- (at the preludes line).
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's unlock channel
-- KEYS[3]  the lock's latch key (same hash slot as KEYS[1]; see ran_by)
-- ARGV[1]  lease in milliseconds, restored while holds remain
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count as the client last saw it
-- ARGV[4]  the message to publish on the last release
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[7]  this request's ID (unique across clients), recorded in the latch
-- KEYS[4]  optional: the lock's waiter registry (same hash slot; see
--          designate.lua)
-- ARGV[8]  how many registered clients the last release designates to wake
--          a waiter (see designate); with no KEYS[4], none
-- Reply:   {1, 0}      released: that was the last hold; key deleted, message published
--          1           the fast path's {1, 0} (see lua.ReleaseReply)
--          {0, holds}  still held, with holds left
--          {-1, 0}     not held by this owner; nothing changed
--
-- Replays are answered without a second effect: the last release records
-- its request in the lock's short-lived latch (at least the lock's last 32
-- last releases, see ran_by), and a decrement that already ran shows as a
-- stored count one below the client's count.
--
-- The fast path, before the preludes are defined (see lua.preludesHere):
-- the owner's last hold. It records the release in the latch first,
-- reading the records it replaces in the same command (SET ... GET, one
-- command where GET then SET would be two): records naming this very
-- request mean the release ran already and this is a late copy, which
-- puts the records back and changes nothing more; otherwise the older
-- records are appended again, cut to the 31 newest only once they are
-- long (see set_latch); a record without a request ID counts only once no hold is
-- left (see release). With no rlock client registered as waiting (nobody
-- to designate) it returns there; otherwise the designation follows the
-- preludes. Any other release takes the slow path, which is handed the
-- field read here and reads the latch itself, untouched.
local stored = redis.call('HGET', KEYS[1], ARGV[2])
local registered = KEYS[4] ~= nil and (tonumber(ARGV[8]) or 0) > 0 and redis.call('EXISTS', KEYS[4]) == 1
local last = stored == '1' and tonumber(ARGV[3]) == 1
if last then
  --@latch_fast KEYS[3] ARGV[7] ARGV[5]
  redis.call('DEL', KEYS[1])
  if not registered then
    if ARGV[6] ~= 's' then
      redis.call('PUBLISH', KEYS[2], ARGV[4])
    end
    if ARGV[6] == 's' or ARGV[6] == 'cs' then
      redis.call('SPUBLISH', KEYS[2], ARGV[4])
    end
    return 1 -- {1, 0}: a bare integer costs Redis less than a table
  end
end
--@preludes

if last then -- released and latched above; rlock clients wait: designate
  designate(KEYS[4], KEYS[2], ARGV[4], ARGV[6], ARGV[8], nil, true)
  return {1, 0}
end
local reply = release(KEYS[1], ARGV[2], ARGV[3], ARGV[1], KEYS[3], ARGV[7], nil, stored)
if reply then
  return reply
end
redis.call('DEL', KEYS[1])
designate(registered and KEYS[4] or nil, KEYS[2], ARGV[4], ARGV[6], ARGV[8], nil, true)
set_latch(KEYS[3], ARGV[7], ARGV[5])
return {1, 0}
