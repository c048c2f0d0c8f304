-- Acquire one hold of a fair lock, or join (or stay in) its queue. Uses the
-- preludes holds.lua and fair_common.lua.
-- KEYS[1..3]  the lock hash, queue and deadlines (see fair_common.lua)
-- KEYS[4]     the lock's fencing token counter
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     owner field
-- ARGV[3]     the owner's hold count as the client last saw it (0 if none)
-- ARGV[4]     "1" to issue fencing tokens, "0" not to
-- ARGV[5]     queue timeout in milliseconds: a queued waiter's deadline is
--             renewed to now + this on every call
-- ARGV[6]     "1" to join the queue (or renew the place in it) when the lock
--             cannot be taken now; "0" for a one-shot try that never queues
-- ARGV[7]     the lock's channel; waiter w listens on ARGV[7] .. ':' .. w
-- ARGV[8]     the message that wakes a waiter
-- ARGV[9]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- Reply:      {1, holds, token}  acquired (as lock.lua)
--             {-1, 0}            the owner's holds are gone (as lock.lua)
--             {0, wait}          not acquired; wait = the lock's PTTL when it
--                                is held (-1: no expiry), or the ms until the
--                                head waiter's deadline when it is free but
--                                another waiter is first in line (that one
--                                is woken when it becomes first, and is
--                                pruned at its deadline if it died)
--
-- A grant pops the owner from the head and wakes the next in line, which
-- then learns the new holder's TTL; pruning dead waiters wakes the new
-- head too (see wake in fair_common.lua). A re-sent grant is recognised by
-- the hold count (as in lock.lua) and wakes nobody again; joining twice
-- keeps one place.
local now = now_ms()
local head, pruned = prune(now)
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
  redis.call('ZREM', KEYS[3], ARGV[2])
  if head then
    redis.call('LPOP', KEYS[2])
    wake(ARGV[7], prune(now), ARGV[8], ARGV[9])
  end
  grant(KEYS[1], ARGV[2], ARGV[1])
  return {1, 1, fencing_token(KEYS[4], ARGV[4], true)}
end

local wait
if free then
  wait = math.max(0, tonumber(redis.call('ZSCORE', KEYS[3], head)) - now)
else
  wait = redis.call('PTTL', KEYS[1])
end
if ARGV[6] == '1' then
  local timeout = tonumber(ARGV[5])
  if not redis.call('ZSCORE', KEYS[3], ARGV[2]) then
    redis.call('RPUSH', KEYS[2], ARGV[2])
  end
  redis.call('ZADD', KEYS[3], now + timeout, ARGV[2])
  -- The queue keys outlive the last deadline by a little, so waiters that
  -- all crashed leave nothing behind for long.
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  local keep = math.max(timeout, tonumber(last[2]) - now) + 1000
  redis.call('PEXPIRE', KEYS[2], keep)
  redis.call('PEXPIRE', KEYS[3], keep)
end
return {0, wait}
