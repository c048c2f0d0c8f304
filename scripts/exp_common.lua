-- Prelude of the expirable semaphore's scripts (package semaphore,
-- Redisson's RPermitExpirableSemaphore): the counter of available permits,
-- {name}:timeout (a sorted set of held permits: raw 16-byte IDs scored by
-- their expiry in epoch ms of the client's clock, or the no-lease sentinel
-- 922337203685477) and the reclaim of expired permits.

-- exp_reclaim returns up to limit (-1: all) permits whose expiry is at or
-- before now to the counter, and publishes the new count if positive.
local function exp_reclaim(counter, timeout, channel, now, limit, how)
  local gone = redis.call('ZRANGEBYSCORE', timeout, 0, now, 'LIMIT', 0, limit)
  if #gone == 0 then
    return
  end
  -- INCRBY first: it fails on a counter of another type (or not an
  -- integer), and the ZREM cannot (Redis keeps what a script wrote before
  -- an error: permits taken off the set and never counted were lost).
  local v = redis.call('INCRBY', counter, #gone)
  redis.call('ZREM', timeout, unpack(gone))
  if v > 0 then
    notify(channel, v, how)
  end
end
