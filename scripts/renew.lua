-- Renew the leases of many locks in one round trip (the watchdog's batch).
-- KEYS[i]    a lock hash
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the owner field that should hold KEYS[i]
-- Reply:     an array; element i is 1 if KEYS[i] is still held by its owner
--            (its lease is now ARGV[1]), 0 if not (nothing changed).
-- Renewing twice is harmless, so a replayed batch needs no protection.
local out = {}
for i = 1, #KEYS do
  local ok, present = pcall(redis.call, 'HEXISTS', KEYS[i], ARGV[i + 1])
  if ok and present == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
