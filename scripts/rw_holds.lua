-- The live hold count of one reader of a read-write lock; read-only. Uses
-- the preludes holds.lua, clock.lua and rw_common.lua.
-- KEYS[1]  the lock hash
-- ARGV[1]  the reader's field "<clientID>:<ownerID>"
-- Reply:   the reader's hold count, or 0 when it has none or every one of
--          its holds ran out (its timeout keys are gone), as the other
--          read-write scripts count it. Nothing is pruned.
local held = holds_of(KEYS[1], ARGV[1])
if held > 0 and read_ttl(KEYS[1], ARGV[1], held) > 0 then
  return held
end
return 0
