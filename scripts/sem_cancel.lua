-- Counting semaphore: give back the permits of an acquire whose caller
-- will not use them (its ctx ended, or its reply was lost), and make sure
-- no late copy of it grants. Idempotent.
-- KEYS: counter, channel, operation record, registry of waiting clients
-- (see sem_designate; optional). ARGV: n, operation ID of the
-- acquire, replay window ms, publish mode (see publish.lua).
-- Reply: 1 when permits were given back, 0 when the acquire had granted
-- nothing (or was given back already).
local n, id = tonumber(ARGV[1]), ARGV[2]
if redis.call('ZSCORE', KEYS[3], id .. '!') then
  return 0
end
local back = 0
if redis.call('ZSCORE', KEYS[3], id) then
  -- A registry of another type is not refused here, as a release does:
  -- the permits go back all the same, woken by the count alone (every
  -- client's waiters look), and nothing after the INCRBY can fail.
  local registered = sem_registry(KEYS[4], n)
  local v = redis.call('INCRBY', KEYS[1], n)
  sem_designate(KEYS[4], KEYS[2], n, ARGV[4], registered)
  notify(KEYS[2], v, ARGV[4])
  back = 1
end
sem_record(KEYS[3], id .. '!', tonumber(ARGV[3]))
return back
