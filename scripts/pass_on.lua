-- Pass a designation on: a client designated to wake a waiter of a
-- reentrant lock that has none to wake (its waiters left, or the woken
-- one's attempt failed and it gave up) designates others in its place;
-- and a client whose waiters of the lock are all gone unregisters. Uses the
-- preludes clock.lua, publish.lua and designate.lua.
-- KEYS[1]  the lock's unlock channel
-- KEYS[2]  the lock's waiter registry
-- KEYS[3…] the lock hash, or the two lock hashes that share this channel
--          and registry ("x" and "{x}"); all in one hash slot
-- ARGV[1]  this client's tag
-- ARGV[2]  "1" to take this client out of the registry (it has no waiter
--          of the lock left), "0" to keep it (a waiter still waits)
-- ARGV[3]  "1" to pass the designation on, "0" only to unregister
-- ARGV[4]  how many clients to designate
-- ARGV[5]  the unlock message
-- ARGV[6]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- Reply:   -1 if nothing was published: not asked to, or every lock hash
--          is held (a held lock's release wakes a waiter); otherwise how
--          many clients it designated (0: the unlock message went out
--          undesignated, for every client).
if ARGV[2] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if ARGV[3] ~= '1' or redis.call('EXISTS', unpack(KEYS, 3)) == #KEYS - 2 then
  return -1
end
return designate(KEYS[2], KEYS[1], ARGV[5], ARGV[6], ARGV[4], ARGV[1])
