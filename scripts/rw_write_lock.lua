-- Acquire one write hold of a read-write lock, or register as a waiting
-- writer. Uses the preludes holds.lua, clock.lua, designate.lua and
-- rw_common.lua, which go after the fast path (at the preludes line).
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
-- KEYS[4]  the writer's until key (see rw_common.lua)
-- KEYS[5]  the registry of clients with waiting writers (base.RWWaiters),
--          when ARGV[8] is given
-- ARGV[8]  the client's tag when a waiting Lock call sends it ("" or
--          absent for any other call: KEYS[5] is then untouched)
-- ARGV[9]  as lock.lua's ARGV[6]: "1" if the client has other calls
--          waiting for this lock, "-" if not and it has no registration,
--          "0" otherwise
-- ARGV[10] the client's longest wait between attempts, in milliseconds
-- ARGV[11] "1" for the first attempt of a Lock call that waits behind the
--          client's writers already waiting: it does all a refused attempt
--          does, and does not take a free lock either ({0, -1}: wait for
--          a wake-up, or the longest wait), which goes to the writer
--          its client's designation wakes
-- Reply:   {1, holds, token}  acquired (as lock.lua)
--          {0, pttl}          not acquired; pttl = the hash's PTTL (-1: no
--                             expiry), or less when a writer's lease
--                             ends earlier (see write_wait); -1 also for
--                             a free lock left to others (ARGV[11])
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
--
-- A waiting call's refused attempt registers its client in KEYS[5], and
-- its grant takes it out or moves it to the back (enlisted), so that a
-- last write release designates a client with a waiting writer (see
-- rw_unlock_write.lua).
--
-- The fast path, before the preludes are defined, for a new owner: a
-- free lock (no hash, no waiting writer, no until key left) is taken at
-- once (the free branch below, inlined), unless the call waits behind its
-- client's writers; and a lock held by another writer alone (no readers,
-- no until key, no waiting writer: its lease is the hash's TTL) refuses
-- with its PTTL. What registers the client follows the preludes.
local fast_grant, fast_wait -- decided here, registered after the preludes
if tonumber(ARGV[3]) == 0 then
  if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) == 0 then
    if ARGV[11] == '1' then
      fast_wait = -1 -- free: left to the writer its client's designation wakes
    else
      redis.call('HSET', KEYS[1], 'mode', 'write', ARGV[2], 1)
      redis.call('PEXPIRE', KEYS[1], ARGV[1])
      fast_grant = {1, 1, 0}
      if ARGV[4] == '1' then
        fast_grant[3] = redis.call('INCR', KEYS[2])
      end
      if ARGV[9] ~= '1' then -- nothing to register but a ZREM
        if ARGV[8] and ARGV[8] ~= '' and ARGV[9] ~= '-' then
          redis.call('ZREM', KEYS[5], ARGV[8])
        end
        if fast_grant[3] == 0 then
          return 1 -- {1, 1, 0}: a bare integer costs Redis less than a table
        end
        return fast_grant
      end
    end
  else
    local all = redis.call('HGETALL', KEYS[1])
    if #all == 4 then
      local mode, wfield
      for i = 1, 3, 2 do
        if all[i] == 'mode' then
          mode = all[i + 1]
        elseif string.sub(all[i], -6) == ':write' and all[i] ~= ARGV[2] then
          wfield = all[i]
        end
      end
      local prefix = string.find(KEYS[1], '{', 1, true) and KEYS[1] or '{' .. KEYS[1] .. '}' -- rw_prefix
      if mode == 'write' and wfield and redis.call('EXISTS', prefix .. ':' .. wfield .. ':rwlock_until', KEYS[3]) == 0 then
        fast_wait = redis.call('PTTL', KEYS[1])
      end
    end
  end
end
--@preludes

if fast_grant then
  enlisted(KEYS[5], ARGV[8], ARGV[9], ARGV[1], ARGV[10])
  return fast_grant
end
if fast_wait then
  if ARGV[8] and ARGV[8] ~= '' then
    register(KEYS[5], ARGV[8], fast_wait >= 0 and fast_wait or ARGV[10])
  end
  return {0, fast_wait}
end

local hash, field, sent = KEYS[1], ARGV[2], tonumber(ARGV[3])
local tag = ARGV[8] or ''

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

if free and ARGV[11] ~= '1' then
  redis.call('ZREM', KEYS[3], field)
  redis.call('HSET', hash, 'mode', 'write', field, 1)
  redis.call('PEXPIRE', hash, ARGV[1])
  redis.call('DEL', KEYS[4]) -- a record left by a lock deleted meanwhile
  enlisted(KEYS[5], tag, ARGV[9], ARGV[1], ARGV[10])
  return {1, 1, fencing_token(KEYS[2], ARGV[4], true)}
end

if not free and ARGV[7] == '1' and (mode == 'read' or redis.call('ZSCORE', KEYS[3], field)) then
  local timeout = tonumber(ARGV[6])
  redis.call('ZADD', KEYS[3], now_ms() + timeout, field)
  -- Every entry's time is at most now + timeout: the set goes with the last.
  redis.call('PEXPIRE', KEYS[3], timeout)
end
local wait = -1 -- free, left to the writer a designation wakes
if not free then
  wait = mode == 'write' and write_wait(hash) or redis.call('PTTL', hash)
end
if tag ~= '' then
  -- the waiting call tries again within wait (or its longest poll)
  register(KEYS[5], tag, wait >= 0 and wait or ARGV[10])
end
return {0, wait}
