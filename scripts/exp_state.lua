-- Expirable semaphore: reclaim expired permits, then report the counts
-- (Redisson's availablePermits and acquiredPermits in one call).
-- Reclaimed permits wake waiters (see exp_announce).
-- KEYS: counter, timeout set, channel, registry of waiting clients. ARGV:
-- now (epoch ms), publish mode.
-- Reply: {available, held}.
local _, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
local r, registered = exp_reclaim(KEYS[1], KEYS[2], tonumber(ARGV[1]), -1, KEYS[4])
exp_announce(KEYS[1], KEYS[3], KEYS[4], r, ARGV[2], registered)
local v = sem_count(KEYS[1])
return {v or 0, redis.call('ZCARD', KEYS[2])}
