-- Counting semaphore: publish the count again, without designations, for
-- a client whose hub could not use the designations a release gave it (no
-- waiter of its left to wake): every client's waiters then look, as after
-- Redisson's release, rather than sleep until their poll.
-- KEYS: counter, channel. ARGV: publish mode (see publish.lua).
-- Reply: the count (0 when missing or not an integer); published only
-- when positive.
local v = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if v > 0 then
  notify(KEYS[2], v, ARGV[1])
end
return v
