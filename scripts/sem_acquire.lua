-- Counting semaphore: take n permits if that many are available
-- (Redisson's tryAcquire: GET, then DECRBY when the count suffices).
-- KEYS: counter, operation record, registry of waiting clients (optional).
-- ARGV: n, operation ID, replay window ms, and for a call that waits: this
-- client's designation (see sem_register; '' for none), the registration's
-- life ms, '1' to take the client off the registry when granted (its last
-- waiter).
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
  -- The ZREM first: it fails on a registry of another type, and nothing
  -- after it can fail (Redis keeps what a script wrote before an error).
  if KEYS[3] and ARGV[4] and ARGV[4] ~= '' and ARGV[6] == '1' then
    redis.call('ZREM', KEYS[3], ARGV[4])
  end
  local left = redis.call('DECRBY', KEYS[1], n)
  sem_record(KEYS[2], id, tonumber(ARGV[3]))
  return {1, left, 0}
end
if KEYS[3] and ARGV[4] and ARGV[4] ~= '' then
  sem_register(KEYS[3], ARGV[4], ARGV[5])
end
return {0, v or 0, 0}
