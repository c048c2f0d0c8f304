-- Prelude of the expirable semaphore's scripts (package semaphore,
-- Redisson's RPermitExpirableSemaphore): the counter of available permits,
-- {name}:timeout (a sorted set of held permits: raw 16-byte IDs scored by
-- their expiry in epoch ms of the client's clock, or the no-lease sentinel
-- 922337203685477), the reclaim of expired permits and the wake-ups they
-- and releases cause (see sem_designate), and the expiry watch.

-- exp_reclaim returns up to limit (-1: all) permits whose expiry is at or
-- before now to the counter, and returns how many it returned and, when
-- it returned some and registry is given, sem_registry's first answer for
-- registry, read before its first write (exp_announce's designations
-- come after it: a registry of another type gets none, instead of failing
-- the script after its writes).
local function exp_reclaim(counter, timeout, now, limit, registry)
  local gone = redis.call('ZRANGEBYSCORE', timeout, 0, now, 'LIMIT', 0, limit)
  if #gone == 0 then
    return 0, false
  end
  local registered = false
  if registry then
    registered = sem_registry(registry, #gone)
  end
  -- INCRBY first: it fails on a counter of another type (or not an
  -- integer), and the ZREM cannot (Redis keeps what a script wrote before
  -- an error: permits taken off the set and never counted were lost).
  redis.call('INCRBY', counter, #gone)
  redis.call('ZREM', timeout, unpack(gone))
  return #gone, registered
end

-- exp_announce wakes waiters for r permits that came back (reclaimed or
-- released), when permits are available: it designates min(r, available)
-- registered clients (see sem_designate), then publishes the count, as
-- Redisson does after a reclaim or a release. registered is whether the
-- registry is a sorted set (sem_registry's first answer, read before the
-- script's first write).
local function exp_announce(counter, channel, registry, r, how, registered)
  if r <= 0 then
    return
  end
  local v = tonumber(redis.call('GET', counter) or '0') or 0
  if v > 0 then
    sem_designate(registry, channel, math.min(r, v), how, registered)
    notify(channel, v, how)
  end
end

-- The expiry watch ({name}:rlock_watch, rlock's own) names the one rlock
-- client that reclaims the permits at the nearest expiry of a held permit
-- and designates waiters for them, so that waiters of other clients need
-- not wake then: "expiry:designation", kept until the expiry plus the
-- registration life (a watching client that is gone lets it lapse, and
-- the waiters' polls reclaim meanwhile).

-- exp_claim_watch claims the watch of expiry e (epoch ms, its score string)
-- for the client with designation desig, unless another client watches
-- an expiry no later than e; it reports whether desig watches e.
local function exp_claim_watch(watch, desig, e, now, live)
  -- pcall: the GET comes after writes, and a watch of another type (only
  -- ever rlock's own string) is claimed over rather than failing the script.
  local w = redis.pcall('GET', watch)
  if type(w) == 'string' then
    local we, wd = string.match(w, '^(%-?%d+):(%d+)$')
    if wd ~= desig and we and tonumber(we) <= tonumber(e) then
      return false
    end
  end
  redis.call('SET', watch, e .. ':' .. desig, 'PX', math.max(tonumber(e) - now, 0) + tonumber(live))
  return true
end

-- exp_rewatch hands the watch of the nearest expiry to the client with
-- designation desig when a write made it nearer than the one watched (a
-- grant, a shorter lease) while rlock clients wait, so that no expiry
-- goes unwatched while the waiters sleep. It returns the expiry desig
-- watches now (epoch ms), or 0.
local function exp_rewatch(timeout, registry, watch, desig, now, live, sentinel)
  if desig == '' or redis.call('EXISTS', registry) == 0 then
    return 0
  end
  local first = redis.call('ZRANGE', timeout, 0, 0, 'WITHSCORES')
  if first[2] == nil or first[2] == sentinel then
    return 0
  end
  if exp_claim_watch(watch, desig, first[2], now, live) then
    return tonumber(first[2])
  end
  return 0
end
