-- Pass a read-write lock's designation on (as pass_on.lua does for the
-- reentrant lock): a client designated to wake a writer that has none to
-- wake, or whose woken writer's attempt failed, designates others in its
-- place; and a client whose waiters of the lock are all gone unregisters
-- from both registries. Uses the preludes publish.lua, clock.lua,
-- designate.lua and rw_common.lua.
-- KEYS[1]  the lock's channel, redisson_rwlock:{name}
-- KEYS[2]  the registry of clients with waiting writers (base.RWWaiters)
-- KEYS[3]  the registry of clients with waiting readers (base.RWReaders)
-- KEYS[4…] the lock hash, or the two lock hashes that share this channel
--          and registries ("x" and "{x}"); all in one hash slot
-- ARGV[1]  this client's tag
-- ARGV[2]  "1" to take this client out of both registries, "0" to keep it
-- ARGV[3]  "1" to pass the designation on, "0" only to unregister
-- ARGV[4]  how many clients to designate
-- ARGV[5]  the message that follows the designation ("1")
-- ARGV[6]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- Reply:   -1 if nothing was published: not asked to, or every lock hash
--          exists (held: its release wakes a waiter); otherwise how many
--          clients it designated (0: the message went out undesignated).
if ARGV[2] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
end
if ARGV[3] ~= '1' or redis.call('EXISTS', unpack(KEYS, 4)) == #KEYS - 3 then
  return -1
end
return wake_rw(KEYS[2], KEYS[3], KEYS[1], ARGV[5], ARGV[6], ARGV[4], ARGV[1])
