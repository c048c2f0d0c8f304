-- A fast path's last release: the latch write of holds.lua's set_latch,
-- with ran_by's search for a copy of this release, inlined (a fast path
-- defines no prelude function: see internal/lua). Not a script: package
-- lua puts it, with its three names filled in, at each line
-- "--@latch_fast <latch key> <request ID> <ttl ms>" of a release script.
-- The record goes first (SET ... GET reads the older ones in the same
-- command); a copy of a release that ran puts the latch back as it was
-- and replies {1, 0}; the older records follow, cut to the 31 newest only
-- once they are longer than 48 records (see set_latch).
local record = @REQUEST and '\n' .. @REQUEST or '1'
local latched = redis.call('SET', @LATCH, record, 'PX', @TTL, 'GET')
if @REQUEST and latched then
  local at = string.find(latched, record, 1, true)
  while at do
    local after = at + #record
    if after > #latched or string.byte(latched, after) == 10 then
      redis.call('SET', @LATCH, latched, 'PX', @TTL) -- a copy of a release that ran
      return {1, 0}
    end
    at = string.find(latched, record, at + 1, true)
  end
  if #latched > 48 * #record then
    local cut = 0
    for _ = 1, 32 do
      cut = string.find(latched, '\n', cut + 1, true)
      if not cut then
        break
      end
    end
    if cut then
      latched = string.sub(latched, 1, cut - 1)
    end
  end
  redis.call('APPEND', @LATCH, latched)
end
