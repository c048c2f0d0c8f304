-- Expirable semaphore: reclaim expired permits, then take every available
-- permit (Redisson's drainPermits), once per operation ID. Nothing is
-- published: the drain leaves no permit to wake a waiter for.
-- KEYS: counter, timeout set, channel, operation record. ARGV: now (epoch
-- ms), publish mode, operation ID, replay window ms.
-- Reply: the permits taken (0 for a copy of a call applied already, or
-- when none were available; a count below zero is left alone).
if sem_seen(KEYS[4], ARGV[3]) then
  return 0
end
local _, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
exp_reclaim(KEYS[1], KEYS[2], tonumber(ARGV[1]), -1)
local v = sem_count(KEYS[1])
sem_record(KEYS[4], ARGV[3], tonumber(ARGV[4]))
if v == nil or v <= 0 then
  return 0
end
redis.call('DECRBY', KEYS[1], v)
return v
