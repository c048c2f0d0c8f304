-- Prelude of the count-down latch scripts (latch_*.lua). A latch is
-- Redisson's RCountDownLatch: KEYS[1] is a string holding the count as a
-- decimal integer (absent means 0), KEYS[2] its channel. rlock adds
-- KEYS[3], the latch's operation log: a sorted set of the IDs of the
-- writes made on the latch, each scored by the server time (ms) it ran at
-- and kept for the replay window, so that a write the Redis client sends
-- again after a lost reply is answered as the first copy was instead of
-- being done twice. The log is trimmed to the window by every write and
-- never holds more than latch_ops_max IDs; it expires a window after the
-- last write.

-- latch_count returns the latch's count (0 when KEYS[1] is absent), or nil
-- when KEYS[1] holds something that is not a latch's count: another type,
-- or a string that is not the decimal of an integer DECR counts down as
-- Redis reads it (no leading zero, within 64 bits, above the least),
-- since DECR comes after the call's record is written and Redis keeps
-- what a script wrote before an error.
local function latch_count()
  local t = redis.call('TYPE', KEYS[1])['ok']
  if t == 'none' then
    return 0
  end
  if t ~= 'string' then
    return nil
  end
  local v = redis.call('GET', KEYS[1])
  local digits = v == '0' and '0' or string.match(v, '^%-?([1-9]%d*)$')
  if not digits or #digits > 19 or (#digits == 19 and digits > '9223372036854775807') then
    return nil
  end
  return tonumber(v)
end

-- latch_ops_max bounds the operation log, whatever the write rate.
local latch_ops_max = 10000

-- latch_replayed trims the operation log to the window (ms) and reports
-- whether operation id ran already, and the server's time.
local function latch_replayed(id, window)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
  return redis.call('ZSCORE', KEYS[3], id) ~= false, now
end

-- latch_record records operation id, run at now, for the window (ms).
local function latch_record(id, now, window)
  redis.call('ZADD', KEYS[3], now, id)
  local n = redis.call('ZCARD', KEYS[3])
  if n > latch_ops_max then
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, n - latch_ops_max - 1)
  end
  redis.call('PEXPIRE', KEYS[3], window)
end
