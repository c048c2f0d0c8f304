-- Delete a read-write lock whoever holds it, and wake its waiters. Uses the
-- preludes publish.lua, holds.lua, clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  the latch key of this request (same hash slot)
-- ARGV[1]  the message to publish ("1": wake all)
-- ARGV[2]  latch lifetime in milliseconds
-- ARGV[3]  "read" or "write" to delete the lock only in that mode (as
--          Redisson's read and write locks' forceUnlock), "" for any mode
-- ARGV[4]  how to publish: 'c', 's' or 'cs' (see publish.lua)
-- ARGV[5]  optional: the holders the caller expects, as their fields
--          sorted and joined with newlines (see force_unlock.lua)
-- Reply:   1 if the lock was deleted, 0 if there was none, -1 if it is held
--          in the other mode or by others than ARGV[5] (nothing changed).
--
-- The readers' timeout keys and the writer's until key go with the hash;
-- a writer whose lease ran out beside its owner's reads is dropped first
-- (lapse_writer), so the lock is then in read mode. Waiting writers stay
-- registered: they still wait. The outcome is recorded in the latch and a
-- re-sent request answers from it (see force_unlock.lua).
local hash = KEYS[1]
local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
local outcome = 0
local mode = lapse_writer(hash)
if redis.call('EXISTS', hash) == 1 then
  outcome = -1
  if (ARGV[3] == '' or ARGV[3] == mode) and (not ARGV[5] or holders_are(hash, ARGV[5])) then
    local all = redis.call('HGETALL', hash)
    for i = 1, #all, 2 do
      if is_writer(all[i]) then
        redis.call('DEL', until_key(hash, all[i]))
      elseif all[i] ~= 'mode' then
        for n = 1, tonumber(all[i + 1]) or 0 do
          redis.call('DEL', timeout_key(hash, all[i], n))
        end
      end
    end
    outcome = redis.call('DEL', hash)
  end
end
if outcome == 1 then
  notify(KEYS[2], ARGV[1], ARGV[4])
end
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])
return outcome
