-- Renew the leases of many locks in one round trip (the watchdog's batch).
-- Uses the preludes holds.lua, clock.lua and rw_common.lua.
-- KEYS[i]    a lock hash
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the owner field that should hold KEYS[i]
-- Reply:     an array; element i is 1 if KEYS[i] is still held by its owner
--            (its lease is now ARGV[1]), 0 if not (nothing changed).
-- Renewing twice is harmless, so a replayed batch needs no protection.
--
-- One script for every kind, with the same arguments: a hash with a "mode"
-- field is a read-write lock (see rw_common.lua). There, a reader's hold
-- is renewed through its timeout keys (every hold 1..count still present;
-- the reader is not held when none is) and the hash is only extended, as
-- other readers may need more (a shorter lease fits it to the longest
-- hold left); a writer's through the hash, whose TTL stays at least the
-- longest lease of the read holds beside it (the writer's own, from a
-- downgrade), and its until key; a writer whose lease ran out beside its
-- owner's reads is dropped first (lapse_writer) and not held. Any other
-- hash is a reentrant or fair lock: its TTL becomes the lease. A sorted
-- set is an expirable semaphore's: the permit's expiry becomes now + lease.

-- renew_read renews reader field's count holds on hash, in mode; false if
-- none is left. A lease shorter than the reader had (SetLease) fits the
-- hash's TTL to the longest hold left (fit_ttl), as Redisson's writer
-- looks only at that TTL; otherwise the hash is only extended.
local function renew_read(hash, mode, field, count, lease)
  local before = read_ttl(hash, field, count)
  if before == 0 then
    return false
  end
  for n = 1, count do
    redis.call('PEXPIRE', timeout_key(hash, field, n), lease)
  end
  if tonumber(lease) < before then
    fit_ttl(hash)
  else
    extend(hash, lease)
    local wfield = mode == 'write' and writer_of(hash)
    if wfield then
      sync_until(hash, wfield)
    end
  end
  return true
end

-- renew_write renews the write hold wfield on hash: its lease ends lease
-- ms from now (its until key, if any, says so), and the hash keeps its
-- owner's reads beside it.
local function renew_write(hash, wfield, lease)
  local _, longest = prune_readers(hash)
  set_ttl(hash, math.max(tonumber(lease), longest))
  lease_writer(hash, wfield, lease, false)
end

local out = {}
for i = 1, #KEYS do
  local hash, field = KEYS[i], ARGV[i + 1]
  local ok, count = pcall(redis.call, 'HGET', hash, field)
  out[i] = 0
  local mode = ok and count and redis.call('HGET', hash, 'mode')
  if mode == 'write' then
    mode = lapse_writer(hash)
    if mode ~= 'write' then
      count = redis.call('HGET', hash, field) -- the writer's lease ran out
    end
  end
  if ok and count then
    if not mode then
      redis.call('PEXPIRE', hash, ARGV[1])
      out[i] = 1
    elseif is_writer(field) then
      renew_write(hash, field, ARGV[1])
      out[i] = 1
    elseif renew_read(hash, mode, field, tonumber(count) or 0, ARGV[1]) then
      out[i] = 1
    end
  elseif not ok then
    -- Not a hash: a sorted set is an expirable semaphore's timeout set
    -- (package semaphore), field a permit scored by its expiry (epoch
    -- ms). A permit whose expiry passed is not revived.
    local t = redis.call('TYPE', hash)
    t = type(t) == 'table' and t.ok or t
    local s = t == 'zset' and redis.call('ZSCORE', hash, field)
    local now = now_ms()
    if s and tonumber(s) > now then
      redis.call('ZADD', hash, 'XX', now + tonumber(ARGV[1]), field)
      out[i] = 1
    end
  end
end
return out
