-- Prelude of every fair-lock script (prepended to each when it is loaded).
-- KEYS[1]  the lock hash (Redisson RLock layout)
-- KEYS[2]  the queue: a list of waiting owner fields, head first
-- KEYS[3]  the deadlines: a sorted set, owner field -> epoch ms until which
--          the waiter counts as alive
--
-- A live waiter renews its deadline every time it polls (at least every
-- third of the queue timeout), so a deadline in the past means a dead
-- waiter: it is pruned when it reaches the head. Times are the server's
-- (TIME), so client clocks do not matter.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- prune removes dead waiters (deadline passed, or none) from the head of
-- the queue. It returns the live head, or false when the queue is empty,
-- and whether it removed any waiter (the head then changed).
local function prune(now)
  local pruned = false
  while true do
    local head = redis.call('LINDEX', KEYS[2], 0)
    if not head then
      return false, pruned
    end
    local deadline = redis.call('ZSCORE', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
      return head, pruned
    end
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
    pruned = true
  end
end

-- wake publishes msg on the channel of waiter head, if there is one, the
-- ways how names (see notify in publish.lua).
--
-- Who is woken, and why that is enough: the owner first in line is the
-- only one that can be granted, and the scripts wake it (1) whenever it
-- becomes first in line (a grant, a departure or a pruning moved the queue
-- up) and (2) whenever a script frees the lock (a release, a force unlock).
-- So the head always has polled since it became head, and then either the
-- lock is free and it is granted, or it learnt the lock's TTL and is woken
-- by a release or retries when the lease runs out. Waiters further back
-- need not poll at all until they become head.
local function wake(prefix, head, msg, how)
  if head then
    notify(prefix .. ':' .. head, msg, how)
  end
end
