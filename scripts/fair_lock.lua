-- Acquire one hold of a fair lock, or join (or stay in) its queue. Uses the
-- preludes holds.lua, publish.lua and fair_common.lua.
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     the lock's fencing token counter
-- KEYS[5]     rlock waiters' liveness hash (see fair_common.lua)
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     owner field
-- ARGV[3]     the owner's hold count as the client last saw it (0 if none)
-- ARGV[4]     "1" to issue fencing tokens, "0" not to
-- ARGV[5]     queue timeout T in milliseconds: a queued waiter counts as
--             alive until now + T, renewed on every call
-- ARGV[6]     "1" to join the queue (or renew the place in it) when the lock
--             cannot be taken now; "0" for a one-shot try that never queues
-- ARGV[7]     the lock's channel; waiter w listens on ARGV[7] .. ':' .. w
-- ARGV[8]     the message that wakes a waiter
-- ARGV[9]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[10]    thread wait time W in milliseconds (Redisson's
--             fairLockWaitTimeout; see fair_common.lua); default 300000
-- Reply:      {1, holds, token}  acquired (as lock.lua)
--             {-1, 0}            the owner's holds are gone (as lock.lua)
--             {0, wait}          not acquired; wait = the lock's PTTL when it
--                                is held (-1: no expiry), or the ms until the
--                                head waiter counts as dead when the lock is
--                                free but another waiter is first in line
--                                (that one is woken when it becomes first,
--                                and is pruned then if it died)
--
-- A grant pops the owner from the head, subtracts W from every score (as a
-- Redisson grant does) and wakes the next in line, which then learns the
-- new holder's TTL; pruning dead waiters wakes the new head too (see wake
-- in fair_common.lua). A re-sent grant is recognised by the hold count (as
-- in lock.lua) and wakes nobody again; joining twice keeps one place.
local now = now_ms()
local timeout = tonumber(ARGV[5])
local W = tonumber(ARGV[10]) or 300000

-- place returns the owner's position (0-based) in the queue, or nil.
local function place()
  return redis.call('LPOS', KEYS[2], ARGV[2])
end

-- renew keeps a queued owner alive, before anything is pruned.
local function renew(pos)
  local floor = now + timeout + pos * W
  local s = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[2]))
  if s < floor then
    redis.call('ZADD', KEYS[3], floor, ARGV[2])
  end
  redis.call('HSET', alive_key(), ARGV[2], now + timeout)
  if redis.call('PTTL', alive_key()) < timeout + 1000 then
    redis.call('PEXPIRE', alive_key(), timeout + 1000)
  end
end

local pos = place()
if ARGV[6] == '1' and pos and redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  renew(pos)
end
local head, pruned = prune(now, ARGV[7], ARGV[8], ARGV[9])
if pruned and head ~= ARGV[2] then
  wake(ARGV[7], head, ARGV[8], ARGV[9])
end
local held = holds_of(KEYS[1], ARGV[2])
if held == 0 and tonumber(ARGV[3]) > 0 then
  return {-1, 0}
end
if held > 0 then
  return {1, reenter(KEYS[1], ARGV[2], held, ARGV[3], ARGV[1]), fencing_token(KEYS[4], ARGV[4], false)}
end

local free = redis.call('EXISTS', KEYS[1]) == 0
if free and (not head or head == ARGV[2]) then
  if head then
    redis.call('LPOP', KEYS[2])
  end
  redis.call('ZREM', KEYS[3], ARGV[2])
  redis.call('HDEL', alive_key(), ARGV[2])
  if head then
    shift(0, W)
    wake(ARGV[7], prune(now, ARGV[7], ARGV[8], ARGV[9]), ARGV[8], ARGV[9])
  end
  grant(KEYS[1], ARGV[2], ARGV[1])
  return {1, 1, fencing_token(KEYS[4], ARGV[4], true)}
end

local wait
if free then
  local until_ = tonumber(redis.call('ZSCORE', KEYS[3], head))
  local a = redis.call('HGET', alive_key(), head)
  if a then
    until_ = math.min(until_, tonumber(a))
  end
  wait = math.max(0, until_ - now)
else
  wait = redis.call('PTTL', KEYS[1])
end
if ARGV[6] == '1' and not redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  -- Join the tail with Redisson's cumulative score, but never below what
  -- a renewal would give (renew).
  redis.call('LREM', KEYS[2], 0, ARGV[2])
  local ahead = redis.call('LLEN', KEYS[2])
  local tail = redis.call('LINDEX', KEYS[2], -1)
  local base = tail and redis.call('ZSCORE', KEYS[3], tail)
  if base then
    base = tonumber(base)
  else
    base = now + math.max(0, redis.call('PTTL', KEYS[1]))
  end
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('ZADD', KEYS[3], math.max(base + W, now + timeout + ahead * W), ARGV[2])
  redis.call('HSET', alive_key(), ARGV[2], now + timeout)
  if redis.call('PTTL', alive_key()) < timeout + 1000 then
    redis.call('PEXPIRE', alive_key(), timeout + 1000)
  end
end
return {0, wait}
