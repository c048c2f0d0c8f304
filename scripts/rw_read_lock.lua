-- Acquire one read hold of a read-write lock. Uses the preludes holds.lua,
-- clock.lua, designate.lua and rw_common.lua (layout there), which go
-- after the fast path (at the preludes line).
-- KEYS[1]  the lock hash
-- KEYS[2]  the writer-wait set, redisson_rwlock_writer_wait:{name}
-- ARGV[1]  lease in milliseconds (of this hold's timeout key)
-- ARGV[2]  the reader's field "<clientID>:<ownerID>"
-- ARGV[3]  the reader's hold count as the client last saw it (0 if none)
-- ARGV[4]  the same owner's writer field (ARGV[2] .. ":write")
-- KEYS[3]  the registry of clients with waiting readers (base.RWReaders),
--          when ARGV[5] is given
-- ARGV[5]  the client's tag when a waiting Lock call sends it ("" or
--          absent for any other call: KEYS[3] is then untouched)
-- ARGV[6]  as lock.lua's ARGV[6] (other calls of the client waiting)
-- ARGV[7]  the client's longest wait between attempts, in milliseconds
-- Reply:   {1, holds, 0}  acquired; holds = the reader's hold count now
--                         (read holds carry no fencing token: 0)
--          {0, wait}      not acquired; wait = ms after which to try again
--                         at the latest: the hash's PTTL when a writer holds
--                         the lock (-1: no expiry; less when the write
--                         lease ends earlier, see write_wait), or the ms until the
--                         first waiting writer's entry runs out when
--                         waiting writers keep new readers out
--          {0, wait, 1}   the same, when waiting writers keep new readers
--                         out of a free lock: a waiting writer can take it,
--                         so a reader woken for it hands its wake-up to one
--          {-1, 0}        the reader's holds are gone (ARGV[3] > 0 but
--                         none left): lost, never passed off as a re-entry
--
-- Who gets in: a re-entering reader always (it may be inside its critical
-- section: refusing it could deadlock); the lock's writer (a downgrade:
-- read while writing, then release the write); a new reader when no writer
-- holds the lock and no writer waits. A re-sent grant is recognised by the
-- hold count (holds.lua) and creates its timeout key once.
--
-- The reader's holds form one holding: a re-entry gives every one of its
-- timeout keys the longest of their leases and this one (hold_reader).
-- The writer's own read (a downgrade) records the end of the write lease
-- first (mark_writer): the write hold ends then, whatever the read keeps
-- of the hash (lapse_writer).
-- A waiting call's refused attempt registers its client in KEYS[3], and
-- its grant takes it out (or moves it to the back when the client has
-- other calls waiting): while an rlock client has readers waiting, a
-- write release wakes every waiter rather than designating one writer
-- (see rw_unlock_write.lua).
--
-- The fast path: a free lock (no hash, no waiting writer) taken by a new
-- reader whose client has no other call waiting for it, before the
-- preludes are defined: the last branch below, inlined.
if ARGV[6] ~= '1' and tonumber(ARGV[3]) == 0 and redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  redis.call('HSET', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  local prefix = string.find(KEYS[1], '{', 1, true) and KEYS[1] or '{' .. KEYS[1] .. '}' -- rw_prefix
  redis.call('SET', prefix .. ':' .. ARGV[2] .. ':rwlock_timeout:1', 1, 'PX', ARGV[1])
  if ARGV[5] and ARGV[5] ~= '' and ARGV[6] ~= '-' then
    redis.call('ZREM', KEYS[3], ARGV[5])
  end
  return 1 -- {1, 1, 0}
end
--@preludes

local hash, field, sent = KEYS[1], ARGV[2], tonumber(ARGV[3])
local tag = ARGV[5] or ''

-- refuse replies {0, wait, extra...}, registering a waiting call's client.
local function refuse(wait, extra)
  if tag ~= '' then
    register(KEYS[3], tag, wait >= 0 and wait or ARGV[7])
  end
  return {0, wait, extra}
end

local mode = lapse_writer(hash)
local held = holds_of(hash, field)
if held > 0 and read_ttl(hash, field, held) == 0 then
  redis.call('HDEL', hash, field) -- every hold ran out
  held = 0
end
if held > 0 then
  if mode == 'write' then
    mark_writer(hash, ARGV[4])
  end
  local holds = reenter(hash, field, held, ARGV[3], ARGV[1])
  extend(hash, hold_reader(hash, field, holds, ARGV[1]))
  if mode == 'write' then
    sync_until(hash, ARGV[4])
  end
  return {1, holds, 0}
end
if sent > 0 then
  return {-1, 0}
end

if mode == 'write' then
  if redis.call('HEXISTS', hash, ARGV[4]) == 0 then
    return refuse(write_wait(hash))
  end
  mark_writer(hash, ARGV[4]) -- before the read makes the hash outlive the write
elseif mode == 'read' or redis.call('EXISTS', hash) == 0 then
  local writers, first = waiting_writers(KEYS[2], now_ms())
  if writers > 0 and mode then
    return refuse(first)
  elseif writers > 0 then
    return refuse(first, 1) -- free: for a writer
  end
else
  return refuse(redis.call('PTTL', hash)) -- another kind of lock by this name
end

if mode then
  redis.call('HSET', hash, field, 1)
  extend(hash, ARGV[1])
else
  redis.call('HSET', hash, 'mode', 'read')
  grant(hash, field, ARGV[1])
end
redis.call('SET', timeout_key(hash, field, 1), 1, 'PX', ARGV[1])
if mode == 'write' then
  sync_until(hash, ARGV[4])
end
enlisted(KEYS[3], tag, ARGV[6], ARGV[1], ARGV[7])
return {1, 1, 0}
