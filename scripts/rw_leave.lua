-- A waiting writer gives up: it leaves the writer-wait set. Uses the
-- preludes publish.lua, holds.lua, clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the writer-wait set, redisson_rwlock_writer_wait:{name}
-- KEYS[3]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  the writer's field "<clientID>:<ownerID>:write"
-- ARGV[2]  the message that wakes every waiter ("1")
-- ARGV[3]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- Reply:   1 if the writer was registered, 0 if not. Leaving twice is
--          harmless.
--
-- When the leaver was the last waiting writer and no writer holds the
-- lock, readers kept out by it may enter now: every waiter is woken.
local left = redis.call('ZREM', KEYS[2], ARGV[1])
if left == 1 then
  local writers = waiting_writers(KEYS[2], now_ms())
  if writers == 0 and lapse_writer(KEYS[1]) ~= 'write' then
    notify(KEYS[3], ARGV[2], ARGV[3])
  end
end
return left
