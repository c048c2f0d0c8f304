-- Release one write hold of a read-write lock. Uses the preludes publish.lua, holds.lua,
-- clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  the latch key: the lock's with ARGV[7], else this request's
--          (same hash slot; see ran_by)
-- ARGV[1]  lease in milliseconds, kept at least while holds remain
-- ARGV[2]  the writer's field "<clientID>:<ownerID>:write"
-- ARGV[3]  the writer's hold count as the client last saw it
-- ARGV[4]  the message published on the last write release ("1": wake all)
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[7]  optional: this request's ID, recorded in the lock's latch
-- Reply:   as unlock.lua: {1, 0} released, {0, holds} still held,
--          {-1, 0} not held by this writer (nothing changed)
--
-- The last write release ends write mode: the lock is deleted, or, when
-- the owner still holds read holds (a downgrade), it becomes a read lock
-- whose TTL is those holds' longest lease. Either way readers can now get
-- in, so the release wakes every waiter (readers, and writers, which
-- learn the new state or register as waiting writers). A writer whose
-- lease ran out while its owner reads (see lapse_writer) holds nothing
-- here. Replays: see unlock.lua.
local hash, field = KEYS[1], ARGV[2]

lapse_writer(hash)
local reply = release(hash, field, ARGV[3], ARGV[1], KEYS[3], ARGV[7])
if reply then
  if reply[1] == 0 then
    lease_writer(hash, field, ARGV[1], true)
  end
  return reply
end
redis.call('HDEL', hash, field)
redis.call('DEL', until_key(hash, field))
local holders, longest = prune_readers(hash)
if holders == 0 then
  redis.call('DEL', hash)
else
  redis.call('HSET', hash, 'mode', 'read')
  set_ttl(hash, longest)
end
notify(KEYS[2], ARGV[4], ARGV[6])
set_latch(KEYS[3], ARGV[7], ARGV[5])
return {1, 0}
