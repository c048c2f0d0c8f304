-- The live hold count of one holder of a read-write lock; read-only. Uses
-- the preludes holds.lua, clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- ARGV[1]  the reader's field "<clientID>:<ownerID>", or the writer's
--          "<clientID>:<ownerID>:write"
-- Reply:   the holder's hold count, or 0 when it has none, when every one
--          of a reader's holds ran out (its timeout keys are gone), or when
--          a writer's lease ran out beside its owner's reads (its until
--          key says so), as the other read-write scripts count it. Nothing
--          is pruned.
local held = holds_of(KEYS[1], ARGV[1])
if is_writer(ARGV[1]) then
  local ends = writer_until(KEYS[1], ARGV[1])
  if ends and ends <= now_ms() then
    return 0 -- its lease ran out beside its owner's reads (see lapse_writer)
  end
  return held
end
if held > 0 and read_ttl(KEYS[1], ARGV[1], held) > 0 then
  return held
end
return 0
