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
-- other readers may need more; a writer's through the hash, whose TTL
-- stays at least the longest lease of the read holds beside it (the
-- writer's own, from a downgrade). Any other hash is a reentrant or fair
-- lock: its TTL becomes the lease.

-- renew_read renews reader field's count holds on hash; false if none is
-- left.
local function renew_read(hash, field, count, lease)
  local alive = false
  for n = 1, count do
    if redis.call('PEXPIRE', timeout_key(hash, field, n), lease) == 1 then
      alive = true
    end
  end
  if alive then
    extend(hash, lease)
  end
  return alive
end

-- renew_write renews the write hold on hash.
local function renew_write(hash, lease)
  local _, longest = prune_readers(hash)
  set_ttl(hash, math.max(tonumber(lease), longest))
end

local out = {}
for i = 1, #KEYS do
  local hash, field = KEYS[i], ARGV[i + 1]
  local ok, count = pcall(redis.call, 'HGET', hash, field)
  out[i] = 0
  if ok and count then
    local mode = redis.call('HGET', hash, 'mode')
    if not mode then
      redis.call('PEXPIRE', hash, ARGV[1])
      out[i] = 1
    elseif is_writer(field) then
      renew_write(hash, ARGV[1])
      out[i] = 1
    elseif renew_read(hash, field, tonumber(count) or 0, ARGV[1]) then
      out[i] = 1
    end
  end
end
return out
