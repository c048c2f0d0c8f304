-- Expirable semaphore: take k permits under given IDs, all or none
-- (Redisson's tryAcquire: reclaim up to k, then DECRBY and ZADD when k
-- permits are available).
-- KEYS: counter, timeout set, channel, operation record. ARGV: raw ID of
-- the first permit, expiry (epoch ms, or the sentinel), now (epoch ms),
-- sentinel, publish mode (see publish.lua), operation ID (the first
-- permit's hex ID), then the raw IDs of the other k-1 permits.
-- Reply: {1} when held (also for a copy of a call that took them); {0, ms}
-- when not, ms being the nearest expiry of a held permit (-1: none).
local k = #ARGV - 5
if redis.call('ZSCORE', KEYS[4], ARGV[6] .. '!') then
  return {0, -1}
end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {1}
end
local _, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
exp_reclaim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[3]), k, ARGV[5])
local v = sem_count(KEYS[1])
if v ~= nil and v >= k then
  redis.call('DECRBY', KEYS[1], k)
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  for i = 7, #ARGV do
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  return {1}
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] ~= nil and first[2] ~= ARGV[4] then
  return {0, tonumber(first[2])}
end
return {0, -1}
