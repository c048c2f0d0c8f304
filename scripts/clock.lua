-- Prelude of the scripts that read the server's clock (the fair-lock and
-- read-write-lock scripts): times are the server's (TIME), so client
-- clocks do not matter (the fair lock's release and grant take their
-- client's for two decisions that drop nobody: see fair_common.lua).

-- now_ms returns the server's time in epoch milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
