-- Counting semaphore: the available permits (Redisson's availablePermits:
-- GET, a missing key being 0), checking the counter's type.
-- KEYS: counter. Reply: the count.
local v, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
return v or 0
