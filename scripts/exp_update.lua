-- Expirable semaphore: set a held permit's expiry (Redisson's
-- updateLeaseTime; also the renewal of a permit without a lease). Reclaims
-- expired permits first, so an expired permit is never revived.
-- KEYS: counter, timeout set, channel. ARGV: raw permit ID, new expiry
-- (epoch ms, or the sentinel), now (epoch ms), publish mode.
-- Reply: 1 when updated, 0 when the permit is not held.
exp_reclaim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[3]), -1, ARGV[4])
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0
