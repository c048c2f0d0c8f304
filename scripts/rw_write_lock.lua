-- Acquire one write hold of a read-write lock, or register as a waiting
-- writer. Uses the preludes holds.lua, clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's fencing token counter
-- KEYS[3]  the writer-wait set, redisson_rwlock_writer_wait:{name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the writer's field "<clientID>:<ownerID>:write"
-- ARGV[3]  the writer's hold count as the client last saw it (0 if none)
-- ARGV[4]  "1" to issue fencing tokens, "0" not to (KEYS[2] is then untouched)
-- ARGV[5]  the same owner's reader field "<clientID>:<ownerID>"
-- ARGV[6]  writer-wait timeout in milliseconds: a registered writer's
--          entry is renewed to now + this on every call; a blocked writer
--          must call again within it (the client polls at least every third)
-- ARGV[7]  "1" to register (or stay registered) as a waiting writer when
--          readers are in the way; "0" for a one-shot try that never does
-- Reply:   {1, holds, token}  acquired (as lock.lua)
--          {0, pttl}          not acquired; pttl = the hash's PTTL (-1: no
--                             expiry), or less when a writer's lease
--                             ends earlier (see write_wait)
--          {-1, 0}            the writer's holds are gone (as lock.lua)
--          {-2, 0}            refused: the owner holds the read lock; a
--                             reader asking for the write lock would wait
--                             for itself (an upgrade; never granted)
--
-- Writers waiting for readers keep new readers out (see rw_read_lock.lua)
-- until each has had its turn: a writer registers only when readers hold
-- the lock (mode "read"), and stays registered, renewing its entry, until
-- it is granted, gives up (rw_leave.lua) or stops polling for ARGV[6] ms.
-- A writer blocked by another writer does not register: at that writer's
-- release, waiting readers and writers compete as equals, so neither side
-- starves the other.
--
-- A writer whose lease ran out while its owner reads is dropped first
-- (lapse_writer); a re-entry moves the end of the lease on (lease_writer).
local hash, field, sent = KEYS[1], ARGV[2], tonumber(ARGV[3])

local mode = lapse_writer(hash)
local held = holds_of(hash, field)
if held > 0 then
  local holds = reenter(hash, field, held, ARGV[3], ARGV[1])
  lease_writer(hash, field, ARGV[1], true)
  return {1, holds, fencing_token(KEYS[2], ARGV[4], false)}
end
if sent > 0 then
  return {-1, 0}
end

local free = redis.call('EXISTS', hash) == 0
if mode == 'read' then
  local reads = holds_of(hash, ARGV[5])
  if reads > 0 and read_ttl(hash, ARGV[5], reads) > 0 then
    return {-2, 0}
  end
  if prune_readers(hash) == 0 then
    redis.call('DEL', hash)
    free = true
  end
end

local now = now_ms()
if free then
  redis.call('ZREM', KEYS[3], field)
  redis.call('HSET', hash, 'mode', 'write')
  grant(hash, field, ARGV[1])
  redis.call('DEL', until_key(hash, field)) -- a record left by a lock deleted meanwhile
  return {1, 1, fencing_token(KEYS[2], ARGV[4], true)}
end

if ARGV[7] == '1' and (mode == 'read' or redis.call('ZSCORE', KEYS[3], field)) then
  local timeout = tonumber(ARGV[6])
  redis.call('ZADD', KEYS[3], now + timeout, field)
  -- Every entry's time is at most now + timeout: the set goes with the last.
  redis.call('PEXPIRE', KEYS[3], timeout)
end
if mode == 'write' then
  return {0, write_wait(hash)}
end
return {0, redis.call('PTTL', hash)}
