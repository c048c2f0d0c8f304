-- Expirable semaphore: the watching client's call at the nearest expiry
-- (see exp_claim_watch): reclaim every expired permit and wake waiters
-- for them (exp_announce), then watch the next expiry while rlock clients are
-- registered as waiting, or end the watch.
-- KEYS: counter, timeout set, channel, registry of waiting clients,
-- expiry watch. ARGV: now (epoch ms), publish mode (see publish.lua), this
-- client's designation, the watch's life ms beyond the expiry, sentinel.
-- Reply: the next expiry this client watches (epoch ms), or -1 when it
-- watches no more (another client does, nobody waits, or no held permit
-- expires).
local w = redis.call('GET', KEYS[5])
if w and select(2, string.match(w, '^(%-?%d+):(%d+)$')) ~= ARGV[3] then
  return -1
end
local _, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
local now = tonumber(ARGV[1])
local r, registered = exp_reclaim(KEYS[1], KEYS[2], now, -1, KEYS[4])
exp_announce(KEYS[1], KEYS[3], KEYS[4], r, ARGV[2], registered)
if r > 0 and not registered then
  -- No registry, or one of another type (no rlock client waits here that
  -- a designation could wake; and after the reclaim's writes, reading it
  -- must not fail): the watch ends, the waiters' polls take over.
  redis.call('DEL', KEYS[5])
  return -1
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. now_ms())
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if redis.call('ZCARD', KEYS[4]) == 0 or first[2] == nil or first[2] == ARGV[5] then
  redis.call('DEL', KEYS[5])
  return -1
end
redis.call('SET', KEYS[5], first[2] .. ':' .. ARGV[3], 'PX', math.max(tonumber(first[2]) - now, 0) + tonumber(ARGV[4]))
return tonumber(first[2])
