-- Counting semaphore: take every available permit (Redisson's
-- drainPermits), once per operation ID. A count of 0 or less is left as
-- it is (Redisson sets it to 0, which adds permits to a negative count).
-- KEYS: counter, operation record. ARGV: operation ID, replay window ms.
-- Reply: the permits taken (0 for a copy of a call applied already).
local id = ARGV[1]
if sem_seen(KEYS[2], id) then
  return 0
end
local v, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
if v == nil or v <= 0 then
  return 0
end
redis.call('DECRBY', KEYS[1], v)
sem_record(KEYS[2], id, tonumber(ARGV[2]))
return v
