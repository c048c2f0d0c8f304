-- Expirable semaphore: set a held permit's expiry (Redisson's
-- updateLeaseTime; also the renewal of a permit without a lease). Reclaims
-- expired permits first, so an expired permit is never revived (they wake
-- waiters: see exp_announce). A lease made shorter than the watched
-- expiry hands the watch to the caller's client (see exp_rewatch).
-- KEYS: counter, timeout set, channel, registry of waiting clients,
-- expiry watch. ARGV: raw permit ID, new expiry (epoch ms, or the
-- sentinel), now (epoch ms), publish mode, this client's designation,
-- the watch's life ms beyond the expiry, sentinel.
-- Reply: {1, ms} when updated, ms being the expiry this client now
-- watches (0: none); {0} when the permit is not held.
local r, registered = exp_reclaim(KEYS[1], KEYS[2], tonumber(ARGV[3]), -1, KEYS[4])
exp_announce(KEYS[1], KEYS[3], KEYS[4], r, ARGV[4], registered)
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  return {1, exp_rewatch(KEYS[2], KEYS[4], KEYS[5], ARGV[5], tonumber(ARGV[3]), ARGV[6], ARGV[7])}
end
return {0}
