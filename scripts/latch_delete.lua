-- Deletes a count-down latch, as Redisson's delete does: when a count was
-- deleted, "1" is published on the channel (rlock's waiters take it as a
-- cue to look, find no count and return). A key that is not a latch's is
-- left alone. The operation log stays, so re-sent copies of earlier writes
-- still count once.
--
-- KEYS: latch, channel, operation log (see latch_common.lua).
-- ARGV: operation ID, replay window (ms), publish argument (see
-- publish.lua).
-- Reply: 1 deleted (also for a re-sent copy of a call that deleted it), 0
-- there was no count, -1 the key is not a latch's.
local n = latch_count()
if not n then
  return -1
end
local window = tonumber(ARGV[2])
local replayed, now = latch_replayed(ARGV[1], window)
if replayed then
  return 1
end
latch_record(ARGV[1], now, window)
if redis.call('DEL', KEYS[1]) == 1 then
  notify(KEYS[2], '1', ARGV[3])
  return 1
end
return 0
