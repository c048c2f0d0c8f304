-- Sets a count-down latch's count when it has none (Redisson's
-- trySetCount): the key is absent, or holds 0.
--
-- KEYS: latch, channel, operation log (see latch_common.lua).
-- ARGV: count (a positive decimal integer), operation ID, replay window
-- (ms), publish argument (see publish.lua).
-- Reply: 1 set, and "1" (new count) published on the channel as Redisson
-- publishes it; also for a re-sent copy of a call that set it. 0 not set:
-- the latch has a count. -1 the key is not a latch's.
local n = latch_count()
if not n then
  return -1
end
local window = tonumber(ARGV[3])
local replayed, now = latch_replayed(ARGV[2], window)
if replayed then
  return 1
end
if n ~= 0 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
latch_record(ARGV[2], now, window)
notify(KEYS[2], '1', ARGV[4])
return 1
