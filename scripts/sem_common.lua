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
-- malformed: not the decimal of a 64-bit integer as INCRBY and DECRBY
-- read it (no sign but '-', no leading zero, no '5.0', '0x10' or '1e3',
-- which tonumber takes), so that those, which come after a script's
-- first write or are it, never fail on a counter it accepted. A key of
-- another type raises WRONGTYPE (before any write).
local function sem_count(key)
  local s = redis.call('GET', key)
  if not s then
    return nil, false
  end
  local digits = s == '0' and '0' or string.match(s, '^%-?([1-9]%d*)$')
  if not digits or #digits > 19 or (#digits == 19 and digits > '9223372036854775807') then
    return nil, true
  end
  return tonumber(s), false
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

-- The registry of rlock clients waiting for permits ({name}:rlock_waiters,
-- rlock's own) is a sorted set of designation messages (one per client:
-- the decimal of m * 2^32, see waiters.CountingDesignation), scored by the
-- server time (ms) until which the registration is live. A waiting call's
-- refused attempt registers its client for its poll plus a grace; a
-- registration lapses by itself, and a client's last waiter granted takes
-- it off.

-- sem_register records designation msg until now + live ms (never
-- shortened), keeping the registry alive at least that long.
local function sem_register(registry, msg, live)
  live = tonumber(live)
  redis.call('ZADD', registry, 'GT', now_ms() + live, msg)
  if redis.call('PTTL', registry) < live then
    redis.call('PEXPIRE', registry, 2 * live)
  end
end

-- sem_registry looks, before a script's first write, at the registry that
-- sem_designate (after the write) wakes through for a release of k
-- permits: it returns whether the registry exists, and whether it holds
-- a value of another type, which the script refuses with
-- sem_misplaced rather than fail on after its write (Redis keeps what a
-- script wrote before an error). TYPE takes the place of the EXISTS
-- sem_designate made: no command more.
local function sem_registry(registry, k)
  if not registry or math.min(tonumber(k) or 0, 32) <= 0 then
    return false, false
  end
  local t = redis.call('TYPE', registry)['ok']
  return t == 'zset', t ~= 'zset' and t ~= 'none'
end

-- sem_misplaced is the error reply for a registry of another type.
local function sem_misplaced()
  return redis.error_reply('WRONGTYPE semaphore waiters registry is not a sorted set')
end

-- sem_designate publishes on channel, before the count that a release of
-- k permits publishes, one designation per waiter to wake (at most 32),
-- spread over the live registered clients, those registered least
-- recently first. A hub that hears designations wakes as many waiters as
-- they name its client, and none if they name only others, so a release
-- of k permits wakes about k waiters in all rather than k in every
-- client. With nobody registered it publishes nothing: the count then
-- wakes waiters in every client, as Redisson's does. Redisson's listener
-- reads a designation's low 32 bits, 0, and wakes none. registered is
-- sem_registry's first answer.
local function sem_designate(registry, channel, k, how, registered)
  k = math.min(tonumber(k) or 0, 32)
  if not registry or k <= 0 or not registered then
    return
  end
  redis.call('ZREMRANGEBYSCORE', registry, '-inf', '(' .. now_ms())
  local msgs = redis.call('ZRANGE', registry, 0, k - 1)
  if #msgs == 0 then
    return
  end
  for i = 0, k - 1 do
    notify(channel, msgs[(i % #msgs) + 1], how)
  end
end
