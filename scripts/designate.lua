-- Prelude of the reentrant lock's scripts (prepended when loaded, after
-- clock.lua and publish.lua): the registry of the rlock clients waiting for
-- a lock, and the designation that lets one release wake one waiter in
-- one or two clients rather than one in every client.
--
-- The registry (base.Waiters) is a sorted set of client tags, decimal
-- integers from 2 to 999999999 (waiters.Tag; an older rlock's may be
-- longer), scored by the server time (ms) until which the registration is
-- live. A waiting call's refused attempt registers its client until its
-- next attempt is due, plus a grace; a crashed client's registration
-- lapses by itself.
--
-- A designation is published on the lock's channel just before the unlock
-- message "0", by the same script, so that every subscriber sees the two
-- in order: a tag alone, or two tags of at most nine digits in one message
-- (see pair). A hub that sees a designation for another client drops the
-- "0" that follows; the designated client wakes one waiter. Redisson reads
-- the channel with its LongCodec and acts on 0 and 1 only, so a
-- designation, an integer of at most 19 digits, is ignored there; its
-- waiters still get the "0". The second designated client is there in
-- case the first is gone: its woken waiter waits a moment for a later
-- release (the first acted), and without one looks at the lock, and tries
-- only if it is free (then also taking the first off the registry).

-- live_grace (ms) is added to a registration's deadline: the time a
-- waiting call may take beyond its due attempt (scheduling, the round
-- trip) before its client counts as gone.
local live_grace = 2000

-- register records that client tag has a waiting call whose next attempt
-- is due within wait ms (GT: a registration is never shortened). The
-- registry must outlive it: when it would not, its TTL is set to twice the
-- registration's life, so that the registrations of a lock granted again
-- and again (each with the lock's full lease to wait) extend it about once
-- per registration life rather than every time.
local function register(registry, tag, wait)
  local live = tonumber(wait) + live_grace
  redis.call('ZADD', registry, 'GT', now_ms() + live, tag)
  if redis.call('PTTL', registry) < live then
    redis.call('PEXPIRE', registry, 2 * live)
  end
end

-- pair returns the message that designates tags a then b, first and
-- second, in one: "1", then each padded with zeros to nine digits (19
-- digits in all, below 2^63, so still a Java long); nil when either tag is
-- longer (an older client's), to be published alone.
local function pair(a, b)
  if #a > 9 or #b > 9 then
    return nil
  end
  return '1' .. string.rep('0', 9 - #a) .. a .. string.rep('0', 9 - #b) .. b
end

-- designate publishes on channel (see notify) the tags of up to n live
-- registered clients other than skip, those registered least recently
-- first (two to a message where pair allows), then msg, and returns how
-- many it designated. With none, msg alone wakes one waiter in every
-- client, as any undesignated "0" does. exists is true when the caller
-- has seen that registry exists.
local function designate(registry, channel, msg, how, n, skip, exists)
  n = tonumber(n) or 0
  local tags = {}
  if registry and n > 0 and (exists or redis.call('EXISTS', registry) == 1) then
    redis.call('ZREMRANGEBYSCORE', registry, '-inf', '(' .. now_ms())
    for _, tag in ipairs(redis.call('ZRANGE', registry, 0, n)) do
      if tag ~= skip and #tags < n then
        tags[#tags + 1] = tag
      end
    end
  end
  local i = 1
  while tags[i] do
    local both = tags[i + 1] and pair(tags[i], tags[i + 1])
    notify(channel, both or tags[i], how)
    i = i + (both and 2 or 1)
  end
  notify(channel, msg, how)
  return #tags
end
