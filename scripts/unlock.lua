-- Release one hold of a reentrant lock. Uses the preludes holds.lua,
-- clock.lua, publish.lua and designate.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's unlock channel
-- KEYS[3]  the owner's latch key (same hash slot as KEYS[1]; see released_by)
-- ARGV[1]  lease in milliseconds, restored while holds remain
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count as the client last saw it
-- ARGV[4]  the message to publish on the last release
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[7]  this request's ID, recorded in the latch
-- KEYS[4]  optional: the lock's waiter registry (same hash slot; see
--          designate.lua)
-- ARGV[8]  how many registered clients the last release designates to wake
--          a waiter (see designate); with no KEYS[4], none
-- Reply:   {1, 0}      released: that was the last hold; key deleted, message published
--          {0, holds}  still held, with holds left
--          {-1, 0}     not held by this owner; nothing changed
--
-- Replays are answered without a second effect: the last release records
-- its request in the owner's short-lived latch, and a decrement that
-- already ran shows as a stored count one below the client's count.
local reply = release(KEYS[1], ARGV[2], ARGV[3], ARGV[1], KEYS[3], ARGV[7])
if reply then
  return reply
end
redis.call('DEL', KEYS[1])
designate(KEYS[4], KEYS[2], ARGV[4], ARGV[6], ARGV[8], nil)
set_latch(KEYS[3], ARGV[7], ARGV[5])
return {1, 0}
