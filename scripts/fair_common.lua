-- Prelude of every fair-lock script (prepended to each when it is loaded,
-- after clock.lua and publish.lua).
-- KEYS[1]  the lock hash (Redisson RLock layout)
-- KEYS[2]  the queue: a list of waiting owner fields, head first
-- KEYS[3]  the scores: a sorted set, owner field -> epoch ms (Redisson's
--          redisson_lock_timeout); a head whose score has passed is dead
-- KEYS[#KEYS] (the last key of every fair script) rlock waiters' liveness
--          hash, "<KEYS[3]>:rlock" (see below)
--
-- One queue serves rlock and Redisson waiters alike, so the scores follow
-- Redisson's cumulative rule, which every waiter of either kind keeps:
-- a joiner scores the tail's score (or, first in line, now + the lock's
-- TTL) plus its thread wait time W; a grant subtracts the granted
-- waiter's W from every score; a waiter that gives up subtracts its W
-- from the scores of the waiters behind it. Redisson waiters never renew;
-- an rlock waiter renews on every poll (at least every third of its queue
-- timeout T) and never lowers its score: it raises it to at least
-- now + T + (waiters ahead) x W, so the grants and departures ahead of it
-- cannot push it into the past before its next renewal.
--
-- rlock waiters also record their own liveness in a hash beside the
-- scores, <KEYS[3]>:rlock, the last key of every fair script (owner field
-- -> now + T at the last renewal): an rlock waiter is dead once that passes, whatever its
-- score says. Times are the server's (now_ms of the prelude clock.lua).

local function alive_key()
  return KEYS[#KEYS]
end

-- dead reports whether waiter w is dead at now: no score, a score that
-- passed, or (an rlock waiter) a liveness deadline that passed.
local function dead(w, now)
  local s = redis.call('ZSCORE', KEYS[3], w)
  if not s or tonumber(s) <= now then
    return true
  end
  local a = redis.call('HGET', alive_key(), w)
  return a ~= false and tonumber(a) <= now
end

-- forget removes waiter w from the queue, the scores and the liveness
-- hash.
local function forget(w)
  redis.call('LREM', KEYS[2], 0, w)
  redis.call('ZREM', KEYS[3], w)
  redis.call('HDEL', alive_key(), w)
end

-- shift subtracts ms from the score of every waiter in the queue from
-- position first (0-based) on. The new scores go back in a few ZADD calls
-- rather than one call per waiter: a grant shifts the whole queue.
local function shift(first, ms)
  if ms <= 0 then
    return
  end
  local pairs_ = {}
  if first == 0 then
    local all = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
    for i = 1, #all, 2 do
      pairs_[#pairs_ + 1] = tonumber(all[i + 1]) - ms
      pairs_[#pairs_ + 1] = all[i]
    end
  else
    for _, w in ipairs(redis.call('LRANGE', KEYS[2], first, -1)) do
      local s = redis.call('ZSCORE', KEYS[3], w)
      if s then
        pairs_[#pairs_ + 1] = tonumber(s) - ms
        pairs_[#pairs_ + 1] = w
      end
    end
  end
  for i = 1, #pairs_, 1000 do
    redis.call('ZADD', KEYS[3], unpack(pairs_, i, math.min(i + 999, #pairs_)))
  end
end

-- prune removes dead waiters from the head of the queue, and tells each
-- on its own channel (prefix .. ':' .. owner), so that a waiter pruned
-- while still alive polls at once and queues again. It returns the live
-- head, or false when the queue is empty, and whether it removed any
-- waiter (the head then changed).
local function prune(now, prefix, msg, how)
  local pruned = false
  while true do
    local head = redis.call('LINDEX', KEYS[2], 0)
    if not head then
      return false, pruned
    end
    if not dead(head, now) then
      return head, pruned
    end
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
    redis.call('HDEL', alive_key(), head)
    notify(prefix .. ':' .. head, msg, how)
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
-- need not poll at all until they become head. (A Redisson grant wakes
-- nobody; Redisson's release wakes the head then.)
local function wake(prefix, head, msg, how)
  if head then
    notify(prefix .. ':' .. head, msg, how)
  end
end
