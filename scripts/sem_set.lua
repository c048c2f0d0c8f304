-- Counting semaphore: set the permits to n only if the counter does not
-- exist (Redisson's trySetPermits; a stored 0 counts as set), publishing
-- n; once per operation ID.
-- KEYS: counter, channel, operation record, registry of waiting clients
-- (see sem_designate; optional). ARGV: n, operation ID, replay
-- window ms, publish mode (see publish.lua).
-- Reply: 1 when set (also for a copy of a call that set it), 0 otherwise.
local n, id = tonumber(ARGV[1]), ARGV[2]
if sem_seen(KEYS[3], id) then
  return 1
end
local v, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
if v ~= nil then
  return 0
end
local registered, misplaced = sem_registry(KEYS[4], n)
if misplaced then
  return sem_misplaced()
end
redis.call('SET', KEYS[1], n)
sem_record(KEYS[3], id, tonumber(ARGV[3]))
sem_designate(KEYS[4], KEYS[2], n, ARGV[4], registered)
notify(KEYS[2], n, ARGV[4])
return 1
