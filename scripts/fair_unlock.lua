-- Release one hold of a fair lock; the last release wakes the head waiter
-- only, on its own channel. Uses the preludes holds.lua, publish.lua and
-- fair_common.lua.
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     the owner's latch key (same hash slot; see ran_by)
-- KEYS[5]     rlock waiters' liveness hash (see fair_common.lua)
-- ARGV[1]     lease in milliseconds, restored while holds remain
-- ARGV[2]     owner field
-- ARGV[3]     the owner's hold count as the client last saw it
-- ARGV[4]     the message to publish on the last release
-- ARGV[5]     latch lifetime in milliseconds
-- ARGV[6]     the lock's channel; waiter w listens on ARGV[6] .. ':' .. w
-- ARGV[7]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[8]     this request's ID, recorded in the latch
-- Reply:      as unlock.lua: {1, 0} released, {0, holds} still held,
--             {-1, 0} not held by this owner (nothing changed)
local reply = release(KEYS[1], ARGV[2], ARGV[3], ARGV[1], KEYS[4], ARGV[8])
if reply then
  return reply
end
redis.call('DEL', KEYS[1])
wake(ARGV[6], prune(ARGV[6], ARGV[4], ARGV[7]), ARGV[4], ARGV[7])
set_latch(KEYS[4], ARGV[8], ARGV[5])
return {1, 0}
