-- Counting semaphore: return n permits (Redisson's release: INCRBY, then
-- publish the new count), once per operation ID.
-- KEYS: counter, channel, operation record, registry of waiting clients
-- (see sem_designate; optional). ARGV: n, operation ID, replay
-- window ms, publish mode (see publish.lua).
-- Reply: {applied (1; 0: a copy of a release applied already), count}.
local n, id = tonumber(ARGV[1]), ARGV[2]
if sem_seen(KEYS[3], id) then
  return {0, 0}
end
local _, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
local registered, misplaced = sem_registry(KEYS[4], n)
if misplaced then
  return sem_misplaced()
end
local v = redis.call('INCRBY', KEYS[1], n)
sem_record(KEYS[3], id, tonumber(ARGV[3]))
sem_designate(KEYS[4], KEYS[2], n, ARGV[4], registered)
notify(KEYS[2], v, ARGV[4])
return {1, v}
