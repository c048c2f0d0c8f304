-- A consistent view of a read-write lock for queries and operators;
-- read-only. Uses the preludes holds.lua, clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- KEYS[2]  the writer-wait set, redisson_rwlock_writer_wait:{name}
-- Reply:   {now, mode, pttl, n, field_1, holds_1, ttl_1, ..., field_n,
--           holds_n, ttl_n, m, writer_1, deadline_1, ..., writer_m,
--           deadline_m}
--          now       the server's time, epoch ms
--          mode      "read", "write", or "" when the hash has no mode
--                    (free, or another kind of lock by this name)
--          pttl      the hash's PTTL (-2 none, -1 no expiry)
--          n         how many live holders follow (readers whose holds all
--                    ran out are left out; nothing is pruned)
--          field_i   a holder's field (a writer's ends in ":write")
--          holds_i   its hold count
--          ttl_i     its remaining lease, ms: a reader's longest timeout
--                    key (-1: no expiry), a writer's the hash's PTTL, or
--                    its until key's time left when it has one (a writer
--                    whose lease ran out beside its owner's reads is left
--                    out, and the mode is then what lapse_writer leaves)
--          m         how many live waiting writers follow
--          writer_j  a waiting writer's field, deadline_j the epoch ms
--                    until which it counts as waiting
local hash = KEYS[1]
local now = now_ms()
local mode = redis.call('HGET', hash, 'mode') or ''
local pttl = redis.call('PTTL', hash)
local holders = {}
local lapsed = false -- the writer's lease ran out beside its owner's reads
if mode == 'write' then
  local wfield = writer_of(hash)
  local ends = wfield and writer_until(hash, wfield)
  lapsed = ends ~= nil and ends <= now
end
if mode ~= '' then
  local all = redis.call('HGETALL', hash)
  for i = 1, #all, 2 do
    local field, count = all[i], tonumber(all[i + 1]) or 0
    if field ~= 'mode' then
      local ttl = pttl
      if is_writer(field) then
        local ends = writer_until(hash, field)
        if lapsed then
          ttl = 0
        elseif ends then
          ttl = ends - now
        end
      else
        ttl = read_ttl(hash, field, count)
        if ttl >= forever then
          ttl = -1
        end
      end
      if ttl ~= 0 then
        table.insert(holders, {field, count, ttl})
      end
    end
  end
end
if lapsed then
  mode = #holders > 0 and 'read' or '' -- as lapse_writer would leave it
end
local out = {now, mode, pttl, #holders}
for _, h in ipairs(holders) do
  table.insert(out, h[1])
  table.insert(out, h[2])
  table.insert(out, h[3])
end
local waiting = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
table.insert(out, #waiting / 2)
for i = 1, #waiting, 2 do
  table.insert(out, waiting[i])
  table.insert(out, tonumber(waiting[i + 1]))
end
return out
