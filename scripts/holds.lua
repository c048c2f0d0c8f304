-- Prelude of every acquire and release script (prepended when loaded):
-- the hold-count logic that the reentrant and fair locks share. The client
-- serialises one owner's operations on one lock and sends the hold count it
-- last saw, so a command re-sent after a lost reply is recognised by the
-- stored count: one more than sent (an acquire that ran), one less (a
-- release that ran).

-- fencing_token returns the holding period's fencing token from counter:
-- a new one on a grant, the current one on a re-entry; 0 when on is not
-- "1" (the counter is then untouched).
local function fencing_token(counter, on, fresh)
  if on ~= '1' then
    return 0
  end
  if fresh then
    return redis.call('INCR', counter)
  end
  return tonumber(redis.call('GET', counter) or '0') or 0
end

-- holds_of returns owner's hold count on hash (0 if none).
local function holds_of(hash, owner)
  return tonumber(redis.call('HGET', hash, owner) or '0') or 0
end

-- extend sets hash's TTL to lease unless it has more left: a re-entry or
-- a release that leaves holds never takes protection away from the holds
-- already there (a shorter lease asked for by an inner hold, while the
-- watchdog or a longer outer lease protects the lock, would let it expire
-- under its owner).
local function extend(hash, lease)
  if redis.call('PTTL', hash) < tonumber(lease) then
    redis.call('PEXPIRE', hash, lease)
  end
end

-- reenter adds one hold for owner, who holds held > 0, unless this request
-- already did, extends the lease, and returns the hold count.
local function reenter(hash, owner, held, sent, lease)
  if held ~= tonumber(sent) + 1 then
    held = redis.call('HINCRBY', hash, owner, 1)
  end
  extend(hash, lease)
  return held
end

-- grant takes a free lock for owner with one hold.
local function grant(hash, owner, lease)
  redis.call('HSET', hash, owner, 1)
  redis.call('PEXPIRE', hash, lease)
end

-- ran_by reports whether latched, the value of a lock's latch (false when
-- there is none), records that request's last release ran. A latch is one
-- key per lock: the request IDs (unique across clients) of the lock's
-- latest last releases, newest first, each after a newline: at least the
-- last 32, and about 48 at most (see set_latch); the key lives the replay
-- window from the newest. So the releases of a lock leave one key of a
-- bounded size, whoever the owners were (a handle per request is an owner
-- per request). A record is dropped only by the 32nd later last release
-- of the same lock, or a later one; docs/safety.md says why 32 and what a
-- re-send that comes later still gets. Without request (a caller that
-- passes a latch key of its own per request), any record counts. The
-- search copies nothing: a match must end where a record ends.
local function ran_by(latched, request)
  if not request then
    return latched ~= false
  end
  if latched == false then
    return false
  end
  local record = '\n' .. request
  local at = string.find(latched, record, 1, true)
  while at do
    local after = at + #record
    if after > #latched or string.byte(latched, after) == 10 then
      return true
    end
    at = string.find(latched, record, at + 1, true)
  end
  return false
end

-- set_latch records in latch that request's last release ran: the record
-- goes first (SET ... GET reads the older ones in the same command), the
-- older records follow, and the latch lives ttl milliseconds (see ran_by).
-- The older records are cut to the 31 newest only once they are longer
-- than 48 records of this request's length, so that most releases copy
-- them back whole (APPEND) rather than cut them first: the latch holds
-- at least the lock's last 32 last releases and about 48 at most.
local function set_latch(latch, request, ttl)
  local record = request and '\n' .. request or '1'
  local latched = redis.call('SET', latch, record, 'PX', ttl, 'GET')
  if request and latched then
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
    redis.call('APPEND', latch, latched)
  end
end

-- release drops one hold of owner, unless this request already did, and
-- returns the release script's reply when that is all there is to do:
-- {0, holds} while holds remain (the lease extended), {-1, 0} when the
-- owner holds nothing, {1, 0} when this request's last release already ran
-- (its latch says so, see ran_by). It returns nil when this was the last
-- hold: the caller then deletes the lock, wakes a waiter, sets the latch
-- (set_latch) and replies {1, 0}. latched and stored are the latch's value
-- (GET) and the owner's field (HGET) when the caller has read them, or nil
-- to read them here.
local function release(hash, owner, sent, lease, latch, request, latched, stored)
  if latched == nil then
    latched = redis.call('GET', latch)
  end
  -- The lock's latch names its recent last releases: a copy of one is
  -- answered from it first, even when it arrives (very late) after the
  -- owner took the lock again, which it must not release.
  if request and ran_by(latched, request) then
    return {1, 0}
  end
  if stored == nil then
    stored = redis.call('HGET', hash, owner)
  end
  local held = tonumber(stored or '0') or 0
  if held <= 0 then
    if ran_by(latched, request) then
      return {1, 0}
    end
    return {-1, 0}
  end
  if held == tonumber(sent) - 1 then
    -- this request's decrement already ran
  elseif held > 1 then
    held = redis.call('HINCRBY', hash, owner, -1)
  else
    return nil
  end
  extend(hash, lease)
  return {0, held}
end

-- holders_are reports whether the owner fields of hash (every field but a
-- read-write lock's "mode"), sorted and joined with newlines, are want.
local function holders_are(hash, want)
  local fields = {}
  for _, f in ipairs(redis.call('HKEYS', hash)) do
    if f ~= 'mode' then
      table.insert(fields, f)
    end
  end
  table.sort(fields)
  return table.concat(fields, '\n') == want
end
