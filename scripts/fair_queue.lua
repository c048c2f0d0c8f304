-- Read a fair lock's queue, for inspection. Changes nothing.
-- KEYS[1..3]  the lock hash, queue and deadlines (see fair_common.lua)
-- Reply:      {now, owner1, deadline1, owner2, deadline2, ...} in queue
--             order; times in epoch ms by the server's clock; a deadline of
--             -1 means the waiter has none (it is pruned when first in line).
local out = {now_ms()}
for _, w in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local d = redis.call('ZSCORE', KEYS[3], w)
  out[#out + 1] = w
  out[#out + 1] = d and tonumber(d) or -1
end
return out
