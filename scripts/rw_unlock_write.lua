-- Release one write hold of a read-write lock. Uses the preludes
-- publish.lua, holds.lua, clock.lua, designate.lua and rw_common.lua,
-- which go after the fast path (at the preludes line).
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
-- KEYS[4]  the writer's until key (see rw_common.lua)
-- KEYS[5]  the registry of clients with waiting writers (base.RWWaiters)
-- KEYS[6]  the registry of clients with waiting readers (base.RWReaders)
-- ARGV[8]  how many registered clients a release that frees the lock
--          designates to wake a writer (see wake_rw)
-- Reply:   as unlock.lua: {1, 0} released, {0, holds} still held,
--          {-1, 0} not held by this writer (nothing changed)
--
-- The last write release ends write mode: the lock is deleted, or, when
-- the owner still holds read holds (a downgrade), it becomes a read lock
-- whose TTL is those holds' longest lease. A lock left in read mode wakes
-- every waiter (readers may all enter). A lock deleted designates up to
-- ARGV[8] clients with waiting writers before the message (wake_rw), so
-- that one writer tries instead of every waiter, unless rlock readers
-- wait (every waiter is then woken, and readers and writers compete as
-- equals); Redisson's waiters hear the message as before. A writer
-- whose lease ran out while its owner reads (see lapse_writer) holds
-- nothing here. Replays: see unlock.lua.
--
-- The fast path, before the preludes are defined: the owner's last hold
-- of a lock that has no other field than its mode and no until key. It
-- records the release in the latch as unlock.lua's fast path does (a late
-- copy of a release that ran puts the records back and changes nothing
-- more), deletes the lock and, with no rlock client registered as
-- waiting, publishes; otherwise the wake-up follows the preludes
-- (wake_rw). Any other release takes the slow path, whose release() reads
-- the latch itself, untouched.
local all = redis.call('HGETALL', KEYS[1])
local last = #all == 4 and tonumber(ARGV[3]) == 1
if last then
  for i = 1, 3, 2 do
    if not ((all[i] == ARGV[2] and all[i + 1] == '1') or (all[i] == 'mode' and all[i + 1] == 'write')) then
      last = false
    end
  end
end
-- One EXISTS tells the three keys apart (a key named n times counts n
-- times): found is 4 with the until key, + 2 with the readers' registry,
-- + 1 with the writers'.
local found = last and redis.call('EXISTS', KEYS[4], KEYS[4], KEYS[4], KEYS[4], KEYS[6], KEYS[6], KEYS[5]) or 0
if found >= 4 then
  last = false -- an until key: the slow path
end
local registered = found > 0
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
    return 1 -- {1, 0}
  end
end
--@preludes

if last then -- released and latched above; rlock clients wait: designate
  if found >= 2 then -- the readers' registry: see wake_rw
    wake_rw(KEYS[5], KEYS[6], KEYS[2], ARGV[4], ARGV[6], ARGV[8])
  else -- only the writers' registry
    designate(KEYS[5], KEYS[2], ARGV[4], ARGV[6], ARGV[8], nil, true)
  end
  return {1, 0}
end
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
redis.call('DEL', KEYS[4])
local holders, longest = prune_readers(hash)
if holders == 0 then
  redis.call('DEL', hash)
  wake_rw(KEYS[5], KEYS[6], KEYS[2], ARGV[4], ARGV[6], ARGV[8])
else
  redis.call('HSET', hash, 'mode', 'read')
  set_ttl(hash, longest)
  notify(KEYS[2], ARGV[4], ARGV[6])
end
set_latch(KEYS[3], ARGV[7], ARGV[5])
return {1, 0}
