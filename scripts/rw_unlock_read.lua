-- Release one read hold of a read-write lock. Uses the preludes
-- publish.lua, holds.lua, clock.lua and rw_common.lua, which go after the
-- fast path (at the preludes line).
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  the latch key: the lock's with ARGV[7], else this request's
--          (same hash slot; see ran_by)
-- ARGV[1]  lease in milliseconds (the hash keeps at least this while holds remain)
-- ARGV[2]  the reader's field "<clientID>:<ownerID>"
-- ARGV[3]  the reader's hold count as the client last saw it
-- ARGV[4]  the message published when the last holder leaves ("0")
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[7]  optional: this request's ID, recorded in the lock's latch
-- Reply:   {1, 0}      released: that was the reader's last hold
--          {0, holds}  the reader still holds, with holds left
--          {-1, 0}     not held by this reader (never, or its holds ran
--                      out); nothing changed but the pruning of its field
--
-- Releasing hold n deletes its timeout key n (the client's count is the
-- index of its newest hold); the holds left keep the reader's longest
-- lease, at least ARGV[1] (hold_reader: one holding, as the client counts
-- it). Wake-ups: only the release that leaves the
-- lock with no holder at all publishes (a writer can now take it); while
-- other readers remain, or while the reader's own write hold remains (a
-- downgrade in progress), nobody could get in, so nobody is woken. Every
-- release leaves the hash's TTL at the longest hold left (fit_ttl), as
-- Redisson's last read release does: Redisson's writer looks only at that
-- TTL. Replays: see unlock.lua.
--
-- The fast path, before the preludes are defined: the last hold of the
-- lock's only holder, whose timeout key is still there (otherwise the
-- slow path finds the reader's holds ran out). It records the release in
-- the latch as unlock.lua's fast path does (a late copy of a release that
-- ran puts the records back and changes nothing more), deletes the lock
-- with the timeout key and publishes.
local all = redis.call('HGETALL', KEYS[1])
local last = #all == 4 and tonumber(ARGV[3]) == 1
if last then
  for i = 1, 3, 2 do
    if not ((all[i] == ARGV[2] and all[i + 1] == '1') or (all[i] == 'mode' and all[i + 1] == 'read')) then
      last = false
    end
  end
end
local held = last and (string.find(KEYS[1], '{', 1, true) and KEYS[1] or '{' .. KEYS[1] .. '}') .. ':' .. ARGV[2] .. ':rwlock_timeout:1' -- timeout_key
if held and redis.call('EXISTS', held) == 1 then
  --@latch_fast KEYS[3] ARGV[7] ARGV[5]
  redis.call('DEL', KEYS[1], held)
  if ARGV[6] ~= 's' then
    redis.call('PUBLISH', KEYS[2], ARGV[4])
  end
  if ARGV[6] == 's' or ARGV[6] == 'cs' then
    redis.call('SPUBLISH', KEYS[2], ARGV[4])
  end
  return 1 -- {1, 0}
end
--@preludes

local hash, field = KEYS[1], ARGV[2]

-- last_left ends the lock when no live holder remains, else fits the
-- hash's TTL to the remaining readers (read mode only: in write mode the
-- TTL is the writer's lease). It reports whether the lock ended.
local function last_left()
  if fit_ttl(hash) == 0 then
    redis.call('DEL', hash)
    notify(KEYS[2], ARGV[4], ARGV[6])
    return true
  end
  return false
end

lapse_writer(hash)
local held = holds_of(hash, field)
if held > 0 and read_ttl(hash, field, held) == 0 then
  redis.call('HDEL', hash, field) -- every hold ran out: not held
  last_left()
  return {-1, 0}
end
local reply = release(hash, field, ARGV[3], ARGV[1], KEYS[3], ARGV[7])
if reply then
  if reply[1] == 0 then
    redis.call('DEL', timeout_key(hash, field, ARGV[3]))
    hold_reader(hash, field, reply[2], ARGV[1])
    fit_ttl(hash)
  end
  return reply
end
redis.call('HDEL', hash, field)
redis.call('DEL', timeout_key(hash, field, 1))
last_left()
set_latch(KEYS[3], ARGV[7], ARGV[5])
return {1, 0}
