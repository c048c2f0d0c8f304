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
-- Beside Redisson's layout, one key of rlock's own:
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
