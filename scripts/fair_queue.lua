-- Read a fair lock's queue, for inspection. Changes nothing. Uses the
-- preludes publish.lua and fair_common.lua.
-- KEYS[1..3]  the lock hash, queue and scores (see fair_common.lua)
-- KEYS[4]     rlock waiters' liveness hash (see fair_common.lua)
-- Reply:      {now, owner1, deadline1, owner2, deadline2, ...} in queue
--             order; times in epoch ms by the server's clock. A deadline is
--             when the waiter counts as dead unless it renews its place:
--             an rlock waiter's liveness deadline, a Redisson waiter's
--             score (see deadline in fair_common.lua); -1 means the
--             waiter has none (it is pruned when first
--             in line).
local out = {now_ms()}
for _, w in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  out[#out + 1] = w
  out[#out + 1] = deadline(w) or -1
end
return out
