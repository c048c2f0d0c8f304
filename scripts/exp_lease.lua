-- Expirable semaphore: a held permit's remaining lease (Redisson's
-- getLeaseTime). Reclaims expired permits first (they wake waiters: see
-- exp_announce).
-- KEYS: counter, timeout set, channel, registry of waiting clients. ARGV: raw permit ID, now (epoch
-- ms), sentinel, publish mode.
-- Reply: {1, ms left} for a permit with a lease; {1, -1} for one with the
-- no-lease sentinel; {0} when the permit is not held.
local r, registered = exp_reclaim(KEYS[1], KEYS[2], tonumber(ARGV[2]), -1, KEYS[4])
exp_announce(KEYS[1], KEYS[3], KEYS[4], r, ARGV[4], registered)
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score then
  return {0}
end
if tonumber(score) >= tonumber(ARGV[3]) then
  return {1, -1}
end
return {1, math.max(tonumber(score) - tonumber(ARGV[2]), 0)}
