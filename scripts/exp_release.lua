-- Expirable semaphore: return a held permit (Redisson's release(id):
-- ZREM, INCRBY, publish the new count), once per call, designating a
-- registered client to wake a waiter first (see sem_designate); with
-- ARGV[6] "cancel", also mark the permit's acquire as given back so that
-- a late copy of it takes nothing.
-- KEYS: counter, channel, timeout set, operation record, registry of
-- waiting clients. ARGV: raw permit ID, now (epoch ms), publish mode (see
-- publish.lua), replay window ms, hex permit ID, "cancel" or "",
-- operation ID of this call.
-- Reply: 1 when returned while its lease ran (also for a copy of a call
-- that did), 0 when the permit was not held or its lease had passed
-- (returned to the pool then, as Redisson does).
-- Every call that can fail (a key of another type, a malformed counter)
-- comes before the first write: Redis keeps what a script wrote before an
-- error.
local hex = ARGV[5]
local cancel = ARGV[6] == 'cancel'
if not cancel and sem_seen(KEYS[4], ARGV[7]) then
  return 1
end
local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
if s then
  local _, bad = sem_count(KEYS[1])
  if bad then
    return sem_malformed()
  end
end
-- The registry is read before the first write: a release refuses one of
-- another type, as the counting semaphore's does; a give-back (cancel)
-- returns the permit all the same, without designations.
local registered = false
if s then
  local misplaced
  registered, misplaced = sem_registry(KEYS[5], 1)
  if misplaced and not cancel then
    return sem_misplaced()
  end
end
if cancel and not sem_seen(KEYS[4], hex .. '!') then
  sem_record(KEYS[4], hex .. '!', tonumber(ARGV[4]))
end
if not s then
  return 0
end
redis.call('ZREM', KEYS[3], ARGV[1])
local v = redis.call('INCRBY', KEYS[1], 1)
if v > 0 then
  sem_designate(KEYS[5], KEYS[2], 1, ARGV[3], registered)
end
notify(KEYS[2], v, ARGV[3])
if tonumber(s) <= tonumber(ARGV[2]) then
  return 0
end
sem_record(KEYS[4], ARGV[7], tonumber(ARGV[4]))
return 1
