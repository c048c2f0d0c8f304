-- Prelude of every fair-lock script (prepended to each when it is loaded,
-- after clock.lua and publish.lua).
-- KEYS[1]  the lock hash (Redisson RLock layout)
-- KEYS[2]  the queue: a list of waiting owner fields, head first
-- KEYS[3]  the scores: a sorted set, owner field -> epoch ms (Redisson's
--          redisson_lock_timeout); a Redisson head whose score has passed
--          is dead (an rlock head: see the liveness hash below)
-- KEYS[#KEYS] (the last key of every fair script) rlock waiters' liveness
--          hash, "<KEYS[3]>:rlock" (see below)
--
-- One queue serves rlock and Redisson waiters alike, so the scores follow
-- Redisson's cumulative rule, which every waiter of either kind keeps:
-- a joiner scores the tail's score (or, first in line, now + the lock's
-- TTL) plus its thread wait time W (an rlock joiner takes the highest
-- score, which is the tail's unless a renewal raised one ahead of it); a grant subtracts the granted
-- waiter's W from every score; a waiter that gives up subtracts its W
-- from the scores of the waiters behind it. Redisson waiters never renew;
-- an rlock waiter renews on every poll (at least every third of its queue
-- timeout T) and never lowers its score: it raises it to at least
-- now + T + (waiters ahead) x W, so the grants and departures ahead of it
-- cannot push it into the past before its next renewal.
--
-- rlock waiters also record their own liveness in a hash beside the
-- scores, <KEYS[3]>:rlock, the last key of every fair script (owner field
-- -> now + T at the last renewal): an rlock waiter is dead once that
-- passes. Its score never falls below it (the score is raised to at
-- least now + T + (waiters ahead) x W at each renewal, and each grant or
-- departure ahead takes one W off it and one waiter from ahead of it), so
-- the liveness deadline alone decides, and the score is not read (given
-- one W for every client of the queue, as Redisson's own rule needs). A
-- waiter without an entry there (a Redisson waiter) is dead once its
-- score passes. Times are the server's (now_ms of the prelude clock.lua);
-- only two decisions that drop nobody take the client's clock: that a
-- head a release finds is clearly alive (see prune), and whether a grant
-- wakes the next in line (see take in fair_lock.lua).

local function alive_key()
  return KEYS[#KEYS]
end

-- The server's time, read (TIME) at most once per script and only when a
-- deadline is to be set or judged: clock() returns it.
local clock_ms
local function clock()
  clock_ms = clock_ms or now_ms()
  return clock_ms
end

-- deadline returns when waiter w counts as dead, and whether w is an
-- rlock waiter: its liveness deadline if it has one, else its score;
-- false for an entry with neither (it is dead).
local function deadline(w)
  local a = redis.call('HGET', alive_key(), w)
  if a then
    return tonumber(a), true
  end
  local s = redis.call('ZSCORE', KEYS[3], w)
  return s and tonumber(s), false
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
-- while still alive polls at once and queues again. me, if given, is the owner running the script, alive whatever its deadline
-- says; first, if given, is the head as the caller already read it. It
-- returns the live head (false when the queue is empty), whether it
-- removed any waiter (the head then changed), and the head's deadline
-- and whether it is an rlock waiter (see deadline; nil for me).
--
-- sure, if given, is a time by the client's clock past which a deadline
-- certainly lies ahead: a waiter whose deadline comes later is alive
-- without reading the server's clock. A release passes its client's
-- now + T/3 (see fair_unlock.lua): a live rlock waiter's deadline is at
-- least 2T/3 ahead (it polls every T/3 at least), so that clock, read
-- when the release was sent, has to be more than T/3 behind the server's
-- when it runs (a skew, or a re-send that long after) for a dead waiter
-- to pass for alive (it is then woken instead of dropped, and dropped by
-- the next attempt that finds the lock free), and more than T/3 ahead for
-- a live one to cost a read of the server's clock. Only the server's
-- clock ever drops a waiter.
local function prune(prefix, msg, how, me, first, sure)
  local pruned = false
  local head = first
  while true do
    if not head then
      head = redis.call('LINDEX', KEYS[2], 0)
    end
    if not head or head == me then
      return head, pruned
    end
    local d, rlock = deadline(head)
    if d and ((sure and d > sure) or d > clock()) then
      return head, pruned, d, rlock
    end
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
    redis.call('HDEL', alive_key(), head)
    notify(prefix .. ':' .. head, msg, how)
    pruned = true
    head = nil
  end
end

-- wake publishes msg on the channel of waiter head, if there is one, the
-- ways how names (see notify in publish.lua).
--
-- Who is woken, and why that is enough: the owner first in line is the
-- only one that can be granted, and the scripts wake it (1) whenever it
-- becomes first in line while the lock is free (a departure or a pruning
-- moved the queue up), (2) whenever a script frees the lock (a release, a
-- force unlock), and (3) when it becomes first in line because the lock
-- was granted to the waiter before it, unless it is an rlock waiter whose
-- liveness deadline comes before the new holder's lease ends (by the
-- granting client's clock, see take in fair_lock.lua): such a
-- waiter polls before its deadline anyway (every third of its queue
-- timeout at least), learns the lock's TTL then, and retries when that
-- runs out, so a wake-up would only cost it a poll. So the head learns
-- the lock's TTL before the lease can run out, and is woken by a release
-- or retries when the lease runs out. Waiters further back need not poll
-- at all until they become head. (A Redisson grant wakes nobody;
-- Redisson's release wakes the head then.)
local function wake(prefix, head, msg, how)
  if head then
    notify(prefix .. ':' .. head, msg, how)
  end
end
