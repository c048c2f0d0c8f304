-- Acquire one hold of a fair lock, or join (or stay in) its queue. Uses the
-- preludes holds.lua, publish.lua and fair_common.lua, which go after the
-- fast path (at the preludes line).
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     the lock's fencing token counter
-- KEYS[5]     rlock waiters' liveness hash (see fair_common.lua)
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     owner field
-- ARGV[3]     the owner's hold count as the client last saw it (0 if none)
-- ARGV[4]     "1" to issue fencing tokens, "0" not to
-- ARGV[5]     queue timeout T in milliseconds: a queued waiter counts as
--             alive until now + T, renewed by every call that queues and
--             is not granted
-- ARGV[6]     when the lock cannot be taken now: "1" to join the queue (the
--             owner has most likely no place yet: a call's first attempt),
--             "2" to renew the owner's place (most likely queued: a later
--             attempt); either takes a place or renews the one there is,
--             the hint only saves reads; "0" for a one-shot try that
--             never queues
-- ARGV[7]     the lock's channel; waiter w listens on ARGV[7] .. ':' .. w
-- ARGV[8]     the message that wakes a waiter
-- ARGV[9]     how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[10]    thread wait time W in milliseconds (Redisson's
--             fairLockWaitTimeout; see fair_common.lua); default 300000
-- ARGV[11]    the client's clock, epoch ms, for a grant's one decision
--             that a client clock may make (whether to wake the next in
--             line, see take); default: the server's
-- Reply:      {1, holds, token}  acquired (as lock.lua)
--             1                  the fast path's grant: {1, 1, 0} (see
--                                lua.AcquireReply)
--             {-1, 0}            the owner's holds are gone (as lock.lua)
--             {0, wait}          not acquired; wait = the lock's PTTL when it
--                                is held (-1: no expiry), or the ms until the
--                                head waiter counts as dead when the lock is
--                                free but another waiter is first in line
--                                (that one is woken when it becomes first,
--                                and is pruned then if it died)
--
-- A grant pops the owner from the head, subtracts W from every score (as a
-- Redisson grant does) and wakes the next in line when it must learn the
-- new holder's TTL (see wake in fair_common.lua); pruning dead waiters
-- wakes the new head too. A re-sent grant is recognised by the hold count
-- (as in lock.lua) and wakes nobody again; joining twice keeps one place.
--
-- Each key is read once, and only where the outcome needs it: one PTTL
-- says whether the lock is free and for how long it is held, the server's
-- clock is read only when a deadline is to be set or judged, a grant
-- reads the head and the next in line with one LRANGE, and a join learns
-- from its ZADD NX whether the owner had a place already. Dead waiters are
-- dropped where the head's turn is decided: by the releases, and by the
-- attempts that find the lock free (or that renew a place or try once);
-- a join behind a held lock leaves the head to the release. A busy
-- queue's grant, join and release thus cost 11, 9 (10 when the lock is
-- free and the head has yet to take it) and 9 server commands, each
-- counting its EVALSHA (see docs/benchmarks.md, "Fair lock: commands per
-- grant").
--
-- The fast path, before the preludes are defined (see lua.preludesHere): a
-- free lock with nobody in line, taken by a new owner. It does what take
-- does for an owner that is not queued: the owner's score and liveness
-- entry go (it has none while the queue is empty, unless a client left
-- them behind), and the lock is granted. What it reads (the lock's PTTL,
-- and when the lock is free the queue's first two entries) is what the
-- slow path reads first: the slow path does not read it again.
local ttl = redis.call('PTTL', KEYS[1]) -- -2: free
local line -- the queue's first two entries, read when the lock is free
if ttl == -2 and tonumber(ARGV[3]) == 0 then
  line = redis.call('LRANGE', KEYS[2], 0, 1)
end
if line and not line[1] then
  redis.call('ZREM', KEYS[3], ARGV[2])
  redis.call('HDEL', KEYS[#KEYS], ARGV[2]) -- alive_key(), inlined
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  if ARGV[4] == '1' then
    return {1, 1, redis.call('INCR', KEYS[4])}
  end
  return 1 -- {1, 1, 0}: a bare integer costs Redis less than a table
end
--@preludes

local timeout = tonumber(ARGV[5])
local W = tonumber(ARGV[10]) or 300000
local me = ARGV[2]

-- keep_alive_key makes the liveness hash outlive an entry just renewed
-- (now + timeout), extending its TTL only when it would lapse within that
-- (so about once per timeout, never shortening a longer one).
local function keep_alive_key()
  if redis.call('PTTL', alive_key()) < timeout + 1000 then
    redis.call('PEXPIRE', alive_key(), 2 * timeout + 1000)
  end
end

-- enqueue puts the owner at the tail with Redisson's cumulative score
-- (the highest score plus W: the tail's, unless a renewal raised a score
-- ahead of it higher still), but never below what a renewal would give.
-- The owner has no place in the queue: both callers know it, one by
-- LPOS, the other by its missing score (every script, rlock's and
-- Redisson's, adds and removes a waiter's place and score together), so
-- no LREM goes first. Should a place without a score turn up all the
-- same (a score deleted by hand), it is pruned when it reaches the head,
-- and its owner, woken, finds its place behind.
local function enqueue(ttl)
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  local base = clock() + math.max(0, ttl)
  if last[2] then
    base = tonumber(last[2])
  end
  local ahead = redis.call('RPUSH', KEYS[2], me) - 1
  redis.call('ZADD', KEYS[3], math.max(base + W, clock() + timeout + ahead * W), me)
  redis.call('HSET', alive_key(), me, clock() + timeout)
  keep_alive_key()
end

-- renew keeps the queued owner (score s) alive: its liveness deadline
-- moves to now + T, and its score to at least now + T + (waiters ahead)
-- x W, never lower.
local function renew(s, ttl)
  local pos = redis.call('LPOS', KEYS[2], me)
  if not pos then
    enqueue(ttl) -- a score without a place: take one
    return
  end
  local floor = clock() + timeout + pos * W
  if s < floor then
    redis.call('ZADD', KEYS[3], floor, me)
  end
  redis.call('HSET', alive_key(), me, clock() + timeout)
  keep_alive_key()
end

-- join puts the owner at the tail, as enqueue does, when it most likely
-- has no place yet (ARGV[6] "1"): the ZADD NX that sets its score says
-- whether it had one, and only then does it read its score and renew
-- instead (a re-sent join, or a second call of the owner). An owner that
-- is the tail already (the highest score is its own) just renews.
local function join(ttl)
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if last[1] == me then
    renew(tonumber(last[2]), ttl)
    return
  end
  local base = clock() + math.max(0, ttl)
  if last[2] then
    base = tonumber(last[2])
  end
  local ahead = redis.call('RPUSH', KEYS[2], me) - 1
  if redis.call('ZADD', KEYS[3], 'NX', math.max(base + W, clock() + timeout + ahead * W), me) == 0 then
    redis.call('RPOP', KEYS[2]) -- it had a score, so most likely a place: undo the push
    renew(tonumber(redis.call('ZSCORE', KEYS[3], me)), ttl)
    return
  end
  redis.call('HSET', alive_key(), me, clock() + timeout)
  keep_alive_key()
end

-- take grants the free lock to the owner, first in line (queued) or with
-- nobody in line. line, if given, is the queue's first two entries as
-- read before. The next in line is woken when it must learn the new
-- holder's TTL (see wake in fair_common.lua): a Redisson waiter, or an
-- rlock waiter whose liveness deadline comes after the new lease ends.
-- That is judged by the client's clock (ARGV[11]): nothing is dropped on
-- it, and a client clock ahead of the server's by X skips a wake-up only
-- when the waiter's own poll comes at most X - 2T/3 late (its deadline
-- is T after its last poll, which it repeats every T/3 at least). A dead
-- next in line is dropped by the release that finds it first.
local function take(queued, line)
  if queued then
    redis.call('LPOP', KEYS[2])
  end
  redis.call('ZREM', KEYS[3], me)
  redis.call('HDEL', alive_key(), me)
  if queued then
    shift(0, W)
    local nxt
    if line then
      nxt = line[2]
    else
      nxt = redis.call('LINDEX', KEYS[2], 0)
    end
    if nxt and nxt ~= me then
      local a = redis.call('HGET', alive_key(), nxt)
      if not a or tonumber(a) > (tonumber(ARGV[11]) or clock()) + tonumber(ARGV[1]) then
        wake(ARGV[7], nxt, ARGV[8], ARGV[9])
      end
    end
  end
  grant(KEYS[1], me, ARGV[1])
  return {1, 1, fencing_token(KEYS[4], ARGV[4], true)}
end

local held = 0
if ttl ~= -2 then
  held = holds_of(KEYS[1], me)
end
if held == 0 and tonumber(ARGV[3]) > 0 then
  return {-1, 0}
end
if held > 0 then
  return {1, reenter(KEYS[1], me, held, ARGV[3], ARGV[1]), fencing_token(KEYS[4], ARGV[4], false)}
end

local wait = ttl
if ttl == -2 then
  line = line or redis.call('LRANGE', KEYS[2], 0, 1)
  if not line[1] or line[1] == me then
    return take(line[1] == me, line)
  end
  local head, pruned, d = prune(ARGV[7], ARGV[8], ARGV[9], me, line[1])
  if not head or head == me then
    return take(head == me)
  end
  if pruned then
    wake(ARGV[7], head, ARGV[8], ARGV[9])
  end
  -- Free, but another waiter is first in line: it is woken when it
  -- becomes first, and pruned then if it died.
  wait = math.max(0, d - clock())
elseif ARGV[6] ~= '1' then
  -- Held, and a one-shot try or a renewal: drop dead waiters from the
  -- head all the same, as Redisson's every attempt does, so that a pruned
  -- waiter is told at once. A join leaves that to the release, which
  -- judges the head when its turn comes (or to the attempts at the
  -- lease's end, when the lease runs out: every waiter is told the TTL).
  local head, pruned = prune(ARGV[7], ARGV[8], ARGV[9], me)
  if pruned and head ~= me then
    wake(ARGV[7], head, ARGV[8], ARGV[9])
  end
end
if ARGV[6] == '1' then
  join(ttl)
elseif ARGV[6] == '2' then
  local s = redis.call('ZSCORE', KEYS[3], me)
  if s then
    renew(tonumber(s), ttl)
  else
    enqueue(ttl)
  end
end
return {0, wait}
