-- Prelude of the counting semaphore's scripts (package semaphore): the
-- counter and the record of operations already applied.
--
-- The counter is a string key holding a signed decimal integer, the
-- available permits, as Redisson's RSemaphore keeps it; a missing key is 0.
-- The operation record ({name}:rlock_ops) is a sorted set of operation IDs,
-- each scored by the server time (ms) until which it is remembered (the
-- replay window): a copy of a call that the Redis client re-sends after a
-- lost reply finds its ID there and changes nothing a second time. An ID
-- followed by '!' marks an acquire that was given back (or never ran):
-- a late copy of it never grants. Every write trims the expired IDs (and
-- all but the newest 10000) and sets the set's TTL to the window.

-- sem_count returns the counter (nil when missing) and whether it is
-- malformed (not an integer). A key of another type raises WRONGTYPE.
local function sem_count(key)
  local s = redis.call('GET', key)
  if not s then
    return nil, false
  end
  local v = tonumber(s)
  if v == nil or v ~= math.floor(v) then
    return nil, true
  end
  return v, false
end

-- sem_seen reports whether operation id is recorded.
local function sem_seen(ops, id)
  return redis.call('ZSCORE', ops, id) ~= false
end

-- sem_record remembers operation id for window ms, trimming expired ones
-- and keeping at most the newest 10000 (a semaphore changed more than
-- 10000 times within the time a re-sent copy can lag loses the oldest
-- records first).
local function sem_record(ops, id, window)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', ops, '-inf', now)
  redis.call('ZADD', ops, now + window, id)
  redis.call('ZREMRANGEBYRANK', ops, 0, -10001)
  redis.call('PEXPIRE', ops, window)
end

-- sem_malformed is the error reply for a counter that is not an integer.
local function sem_malformed()
  return redis.error_reply('WRONGTYPE semaphore counter is not an integer')
end
