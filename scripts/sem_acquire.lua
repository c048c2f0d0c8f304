-- Counting semaphore: take n permits if that many are available
-- (Redisson's tryAcquire: GET, then DECRBY when the count suffices).
-- KEYS: counter, operation record. ARGV: n, operation ID, replay window ms.
-- Reply: {granted (1/0), available after the call, replayed (1: a copy of
-- an operation already applied; nothing changed)}.
local n, id = tonumber(ARGV[1]), ARGV[2]
-- An attempt given back (or cancelled before it ran) never takes permits;
-- one that an earlier copy applied is reported as applied.
if redis.call('ZSCORE', KEYS[2], id .. '!') then
  return {0, 0, 1}
end
if redis.call('ZSCORE', KEYS[2], id) then
  return {1, 0, 1}
end
local v, bad = sem_count(KEYS[1])
if bad then
  return sem_malformed()
end
if v ~= nil and v >= n then
  local left = redis.call('DECRBY', KEYS[1], n)
  sem_record(KEYS[2], id, tonumber(ARGV[3]))
  return {1, left, 0}
end
return {0, v or 0, 0}
