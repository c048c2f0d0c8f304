-- Counts a count-down latch down by one, as Redisson's countDown does:
-- DECR; at or below 0 the key is deleted; at exactly 0, "0" (count
-- reached zero) is published on the channel. A latch without a count is
-- left alone. Every call is recorded in the operation log, so a re-sent
-- copy never counts down twice (and never counts down a later round).
--
-- KEYS: latch, channel, operation log (see latch_common.lua).
-- ARGV: operation ID, replay window (ms), publish argument (see
-- publish.lua).
-- Reply: 1 counted down, 0 no count to count down, 2 a re-sent copy of a
-- call that ran already (nothing done), -1 the key is not a latch's.
local n = latch_count()
if not n then
  return -1
end
local window = tonumber(ARGV[2])
local replayed, now = latch_replayed(ARGV[1], window)
if replayed then
  return 2
end
latch_record(ARGV[1], now, window)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local v = redis.call('DECR', KEYS[1])
if v <= 0 then
  redis.call('DEL', KEYS[1])
end
if v == 0 then
  notify(KEYS[2], '0', ARGV[3])
end
return 1
