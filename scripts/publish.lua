-- Prelude of every script that wakes waiters (prepended when loaded): how a
-- message is published. Redis keeps classic pub/sub (PUBLISH, SUBSCRIBE)
-- and sharded pub/sub (SPUBLISH, SSUBSCRIBE, Redis 7+) apart, so a release
-- must use the way its waiters listen: how is 'c' (PUBLISH: every node of a
-- cluster), 's' (SPUBLISH: the channel's shard only) or 'cs' (both). Any
-- other value publishes classically, so the scripts run unchanged on
-- miniredis and Redis < 7, which lack SPUBLISH.
local function notify(channel, msg, how)
  if how ~= 's' then
    redis.call('PUBLISH', channel, msg)
  end
  if how == 's' or how == 'cs' then
    redis.call('SPUBLISH', channel, msg)
  end
end
