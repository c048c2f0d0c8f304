-- Expirable semaphore: take k permits under given IDs, all or none
-- (Redisson's tryAcquire: reclaim, then DECRBY and ZADD when k permits
-- are available). Reclaimed permits left over wake waiters (exp_announce).
-- A refused call that waits registers its client (see sem_register) and
-- may take the expiry watch (see exp_claim_watch); a grant hands it on
-- (see exp_rewatch).
-- KEYS: counter, timeout set, channel, operation record, registry of
-- waiting clients, expiry watch. ARGV: raw ID of the first permit, expiry
-- (epoch ms, or the sentinel), now (epoch ms), sentinel, publish mode
-- (see publish.lua), operation ID (the first permit's hex ID), this
-- client's designation, the registration life ms, the mode ('0': a call
-- that does not wait; '1': one that waits; '2': one that waits, its
-- client's last waiter, which a grant takes off the registry), then the
-- raw IDs of the other k-1 permits.
-- Reply: {1, available after the call, ms} when held (also {1, 0, 0} for
-- a copy of a call that took them), ms being the expiry this client now
-- watches (0: none; see exp_rewatch); {0, ms, watch} when not, ms being
-- the nearest expiry of a held permit (-1: none) and watch 1 when this
-- client watches it.
local k = #ARGV - 8
if redis.call('ZSCORE', KEYS[4], ARGV[6] .. '!') then
  return {0, -1, 0}
end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {1, 0, 0}
end
local _, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
local now = tonumber(ARGV[3])
local waits = ARGV[9] ~= '0'
-- A call that waits registers its client or takes it off the registry
-- after writes: a registry of another type is refused before any.
local registered, known = false, false
if waits then
  local misplaced
  registered, misplaced = sem_registry(KEYS[5], 1)
  if misplaced then
    return sem_misplaced()
  end
  known = true
end
local r, reg = exp_reclaim(KEYS[1], KEYS[2], now, -1, (not known) and KEYS[5] or nil)
if not known then
  registered = reg
end
local v = sem_count(KEYS[1])
if v ~= nil and v >= k then
  redis.call('DECRBY', KEYS[1], k)
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  for i = 10, #ARGV do
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  if ARGV[9] == '2' then
    redis.call('ZREM', KEYS[5], ARGV[7])
  end
  exp_announce(KEYS[1], KEYS[3], KEYS[5], r, ARGV[5], registered)
  return {1, v - k, exp_rewatch(KEYS[2], KEYS[5], KEYS[6], ARGV[7], now, ARGV[8], ARGV[4])}
end
exp_announce(KEYS[1], KEYS[3], KEYS[5], r, ARGV[5], registered)
if waits then
  sem_register(KEYS[5], ARGV[7], ARGV[8])
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] ~= nil and first[2] ~= ARGV[4] then
  local watch = 0
  if waits and exp_claim_watch(KEYS[6], ARGV[7], first[2], now, ARGV[8]) then
    watch = 1
  end
  return {0, tonumber(first[2]), watch}
end
return {0, -1, 0}
