-- Prelude of every read-write-lock script and of renew.lua (prepended after
-- holds.lua and clock.lua). The layout is Redisson's RReadWriteLock:
--
--   <name>        hash: "mode" = "read" | "write"; one field per holder,
--                 value = hold count; a writer's field ends in ":write"
--                 ("<clientID>:<ownerID>:write"), a reader's does not
--   <prefix>:<field>:rwlock_timeout:<n>
--                 one string per read hold n = 1..count of reader <field>,
--                 with that hold's lease as its TTL; <prefix> is "{<name>}",
--                 or <name> itself when it already has a "{" (Redisson's
--                 suffix rule), so every key shares the hash's slot
--
-- A read hold counts while its timeout key exists; a reader counts while
-- any of its holds does. The hash's TTL covers the writer's lease and
-- every live read hold, so it outlives no holder by design but may outlive
-- dead readers: their fields are pruned wherever the scripts need to know
-- who really holds the lock (a writer asking, the last read release).
--
-- One reader's holds form one holding (as a reentrant lock's holds do): it
-- lasts as long as its longest lease, so every one of its timeout keys
-- gets that TTL (hold_reader), whichever hold asked for it; a release
-- deletes the newest key and leaves the others as they are.
--
-- Beside Redisson's layout, two keys of rlock's own:
--
--   <prefix>:<writer field>:rwlock_until
--                 string: the epoch ms (server clock) at which the write
--                 hold's lease ends, while the writer's owner also holds
--                 reads (a downgrade in progress): the hash's TTL then
--                 covers those reads and no longer says when the write
--                 hold ends. From that moment the writer does not count
--                 (lapse_writer drops it; its owner keeps its reads). The
--                 key's TTL follows the hash's (sync_until), so that it
--                 outlives its deadline as long as the writer's field
--                 does. A writer without this key (Redisson's, or one whose
--                 owner never read while writing) lasts as long as the
--                 hash. Redisson's scripts never read it (its name has no
--                 hold number).
--
--   redisson_rwlock_writer_wait:{<name>}
--                 sorted set: writer field -> epoch ms (server clock) until
--                 which that writer counts as waiting. A writer that finds
--                 readers in its way registers here and renews its entry on
--                 every poll; while a live entry exists no new reader is
--                 let in (re-entering readers are). Redisson does not read
--                 this key.

-- rw_prefix returns the prefix of hash's timeout keys (Redisson's suffix
-- rule: the hash tag is the name's own if it has one).
local function rw_prefix(hash)
  if string.find(hash, '{', 1, true) then
    return hash
  end
  return '{' .. hash .. '}'
end

-- timeout_key returns the timeout key of read hold n of reader field.
local function timeout_key(hash, field, n)
  return rw_prefix(hash) .. ':' .. field .. ':rwlock_timeout:' .. n
end

-- is_writer reports whether field is a writer's field.
local function is_writer(field)
  return string.sub(field, -6) == ':write'
end

-- forever stands for "no expiry" (PTTL -1) when leases are compared.
local forever = 2 ^ 52

-- read_ttl returns the longest remaining lease (ms) of reader field's
-- holds 1..count: 0 when every one has run out (the reader is gone),
-- forever when one has no expiry.
local function read_ttl(hash, field, count)
  local best = 0
  for n = 1, count do
    local p = redis.call('PTTL', timeout_key(hash, field, n))
    if p == -1 then
      return forever
    end
    if p > best then
      best = p
    end
  end
  return best
end

-- prune_readers removes the fields of readers whose holds have all run out
-- and returns how many holders (readers and writers) remain and the
-- longest remaining lease of the live readers (0 if none).
local function prune_readers(hash)
  local holders, longest = 0, 0
  local all = redis.call('HGETALL', hash)
  for i = 1, #all, 2 do
    local field = all[i]
    if field ~= 'mode' then
      if is_writer(field) then
        holders = holders + 1
      else
        local ttl = read_ttl(hash, field, tonumber(all[i + 1]) or 0)
        if ttl > 0 then
          holders = holders + 1
          longest = math.max(longest, ttl)
        else
          redis.call('HDEL', hash, field)
        end
      end
    end
  end
  return holders, longest
end

-- set_ttl sets hash's TTL to ttl ms (forever: no expiry).
local function set_ttl(hash, ttl)
  if ttl >= forever then
    redis.call('PERSIST', hash)
  else
    redis.call('PEXPIRE', hash, ttl)
  end
end

-- waiting_writers drops the entries of wait whose time has passed and
-- returns how many remain and the ms until the first of them runs out.
local function waiting_writers(wait, now)
  redis.call('ZREMRANGEBYSCORE', wait, '-inf', now)
  local first = redis.call('ZRANGE', wait, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return 0, 0
  end
  return redis.call('ZCARD', wait), math.max(1, tonumber(first[2]) - now)
end

-- until_key returns the key holding the end of writer field wfield's lease
-- (see above).
local function until_key(hash, wfield)
  return rw_prefix(hash) .. ':' .. wfield .. ':rwlock_until'
end

-- writer_of returns the writer field of hash, or nil.
local function writer_of(hash)
  for _, f in ipairs(redis.call('HKEYS', hash)) do
    if is_writer(f) then
      return f
    end
  end
  return nil
end

-- writer_until returns the epoch ms at which writer wfield's lease ends,
-- or nil when its lease is the hash's TTL (no until key).
local function writer_until(hash, wfield)
  return tonumber(redis.call('GET', until_key(hash, wfield)) or '')
end

-- sync_until gives writer wfield's until key, if any, the hash's TTL.
local function sync_until(hash, wfield)
  local key = until_key(hash, wfield)
  if redis.call('EXISTS', key) == 0 then
    return
  end
  local pttl = redis.call('PTTL', hash)
  if pttl > 0 then
    redis.call('PEXPIRE', key, pttl)
  elseif pttl == -1 then
    redis.call('PERSIST', key)
  end
end

-- mark_writer records the end of writer wfield's lease in its until key,
-- before its owner's first read hold beside it makes the hash's TTL
-- longer: the end is the hash's TTL from now. Nothing when the key exists
-- or the hash has no expiry.
local function mark_writer(hash, wfield)
  local key = until_key(hash, wfield)
  local pttl = redis.call('PTTL', hash)
  if pttl > 0 and redis.call('EXISTS', key) == 0 then
    redis.call('SET', key, now_ms() + pttl, 'PX', pttl)
  end
end

-- lease_writer moves the end of writer wfield's lease to lease ms from
-- now (only later, when later), if it has an until key, and keeps the key
-- as long as the hash. The caller has set the hash's TTL.
local function lease_writer(hash, wfield, lease, later)
  local ends = writer_until(hash, wfield)
  if not ends then
    return
  end
  local now = now_ms()
  if later then
    ends = math.max(ends, now + tonumber(lease))
  else
    ends = now + tonumber(lease)
  end
  redis.call('SET', until_key(hash, wfield), ends)
  sync_until(hash, wfield)
end

-- write_wait returns how long a caller kept out by a writer waits at the
-- latest: the hash's PTTL, or less when the writer's lease ends earlier.
local function write_wait(hash)
  local pttl = redis.call('PTTL', hash)
  local wfield = writer_of(hash)
  local ends = wfield and writer_until(hash, wfield)
  if ends and (pttl < 0 or ends - now_ms() < pttl) then
    return math.max(1, ends - now_ms())
  end
  return pttl
end

-- hold_reader gives every hold 1..count of reader field the TTL of the
-- longest of them, at least lease ms (see above), re-creating any missing
-- one, and returns that TTL (forever: no expiry).
local function hold_reader(hash, field, count, lease)
  local ttl = math.max(tonumber(lease), read_ttl(hash, field, count))
  for n = 1, count do
    if ttl >= forever then
      redis.call('SET', timeout_key(hash, field, n), 1)
    else
      redis.call('SET', timeout_key(hash, field, n), 1, 'PX', ttl)
    end
  end
  return ttl
end

-- fit_ttl prunes hash's dead readers, sets its TTL to its longest
-- remaining hold and returns how many holders remain. In read mode that is
-- the longest live read hold (Redisson's writer looks only at the hash's
-- TTL, so it must not outlive the holds); in write mode, when the writer
-- has an until key, the longer of the writer's lease and its owner's
-- reads; otherwise the writer's lease is the hash's TTL and stays.
local function fit_ttl(hash)
  local holders, longest = prune_readers(hash)
  if holders == 0 then
    return 0
  end
  local mode = redis.call('HGET', hash, 'mode')
  if mode == 'read' then
    set_ttl(hash, longest)
  elseif mode == 'write' then
    local wfield = writer_of(hash)
    local ends = wfield and writer_until(hash, wfield)
    if ends then
      set_ttl(hash, math.max(ends - now_ms(), longest, 1))
      sync_until(hash, wfield)
    end
  end
  return holders
end

-- lapse_writer drops hash's writer once its lease, recorded in its until
-- key, has run out: the lock becomes a read lock of the writer's owner's
-- reads left (TTL: their longest), or is deleted when none is left. It
-- returns the mode afterwards (false: no hash, or no mode).
local function lapse_writer(hash)
  local mode = redis.call('HGET', hash, 'mode')
  if mode ~= 'write' then
    return mode
  end
  local wfield = writer_of(hash)
  local ends = wfield and writer_until(hash, wfield)
  if not ends or ends > now_ms() then
    return mode
  end
  redis.call('DEL', until_key(hash, wfield))
  redis.call('HDEL', hash, wfield)
  local holders, longest = prune_readers(hash)
  if holders == 0 then
    redis.call('DEL', hash)
    return false
  end
  redis.call('HSET', hash, 'mode', 'read')
  set_ttl(hash, longest)
  return 'read'
end

-- The registries of rlock's clients with waiting writers and with waiting
-- readers (base.RWWaiters, base.RWReaders; registrations as in
-- designate.lua, which goes before this prelude). A waiting call's refused
-- attempt registers its client; its grant takes the client out, or moves
-- it to the back when the client has other calls waiting (see enlisted).

-- enlisted records a waiting call's grant in registry for client tag:
-- others is "1" when the client has other calls waiting (it goes to the
-- back: served least recently no more), "-" when it certainly has no
-- registration; otherwise it is taken out.
local function enlisted(registry, tag, others, lease, poll)
  if not tag or tag == '' or others == '-' then
    return
  elseif others == '1' then
    register(registry, tag, math.max(tonumber(lease), tonumber(poll)))
  else
    redis.call('ZREM', registry, tag)
  end
end

-- wake_rw publishes msg on channel for a read-write lock that writers
-- may now take: after designating up to n clients with waiting writers
-- (see designate), so that one writer tries rather than every waiter of
-- every client; but undesignated, waking every waiter, when rlock clients
-- have readers waiting (they enter as a group) or none has writers
-- waiting. Redisson's waiters read the designation as a number other
-- than 0 and 1 and ignore it; msg ("1") wakes them all, as before.
local function wake_rw(registry, readers, channel, msg, how, n, skip)
  if redis.call('EXISTS', readers) == 1 then
    redis.call('ZREMRANGEBYSCORE', readers, '-inf', '(' .. now_ms())
    if redis.call('EXISTS', readers) == 1 then
      n = 0
    end
  end
  return designate(registry, channel, msg, how, n, skip)
end
