-- Release one hold of a fair lock; the last release wakes the head waiter
-- only, on its own channel. Uses the preludes holds.lua, publish.lua and
-- fair_common.lua, which go after the fast path (at the preludes line).
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     the lock's latch key (same hash slot; see ran_by)
-- KEYS[5]     rlock waiters' liveness hash (see fair_common.lua)
-- ARGV[1]     lease in milliseconds, restored while holds remain
-- ARGV[2]     owner field
-- ARGV[3]     the owner's hold count as the client last saw it
-- ARGV[4]     the message to publish on the last release
-- ARGV[5]     latch lifetime in milliseconds
-- ARGV[6]     the lock's channel; waiter w listens on ARGV[6] .. ':' .. w
-- ARGV[7]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[8]     this request's ID (unique across clients), recorded in the latch
-- ARGV[9]     the client's clock plus a third of its queue timeout, epoch
--             ms: a head waiter whose deadline comes later is alive without
--             reading the server's clock (see prune in fair_common.lua);
--             optional
-- Reply:      as unlock.lua: {1, 0} released (1 from the fast path, see
--             lua.ReleaseReply), {0, holds} still held, {-1, 0} not held by
--             this owner (nothing changed)
--
-- The fast path, before the preludes are defined (see lua.preludesHere):
-- the owner's last hold. As in unlock.lua, it records the release in the
-- latch with SET ... GET, answers a copy of a release that ran from the
-- records it replaced, and otherwise appends them again (at least the last 32). With nobody in line it returns there; otherwise
-- waking the first in line follows the preludes. Any other release takes
-- the slow path, which is handed the field it read.
local stored = redis.call('HGET', KEYS[1], ARGV[2])
local head -- the queue's first entry, read for what looks like the last hold
if stored == '1' and tonumber(ARGV[3]) == 1 then
  head = redis.call('LINDEX', KEYS[2], 0)
end
if head ~= nil then -- the last hold; head is false for an empty queue
  --@latch_fast KEYS[4] ARGV[8] ARGV[5]
  redis.call('DEL', KEYS[1])
  if head == false then
    return 1 -- {1, 0}: a bare integer costs Redis less than a table
  end
end
--@preludes

if head then -- released and latched above; someone is in line: wake them
  wake(ARGV[6], prune(ARGV[6], ARGV[4], ARGV[7], nil, head, tonumber(ARGV[9])), ARGV[4], ARGV[7])
  return {1, 0}
end
local reply = release(KEYS[1], ARGV[2], ARGV[3], ARGV[1], KEYS[4], ARGV[8], nil, stored)
if reply then
  return reply
end
redis.call('DEL', KEYS[1])
wake(ARGV[6], prune(ARGV[6], ARGV[4], ARGV[7], nil, nil, tonumber(ARGV[9])), ARGV[4], ARGV[7])
set_latch(KEYS[4], ARGV[8], ARGV[5])
return {1, 0}
