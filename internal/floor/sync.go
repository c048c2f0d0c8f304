package floor

import "github.com/redis/go-redis/v9"

// The floors of the semaphores and the latch: the least a Redis counting
// semaphore, a Redisson-layout semaphore (RSemaphore, and
// RPermitExpirableSemaphore) and a Redisson-layout count-down latch send.
// No operation record, no replay window, no waiter bookkeeping.
var (
	// SemAcquire takes ARGV[1] permits of the counter KEYS[1] if that many
	// are available (Redisson's tryAcquire: GET, then DECRBY): 1 when
	// taken, 0 when not. Both semaphore floors acquire with it; the bare
	// floor releases with a plain INCRBY, the Redisson-layout one with
	// SemReleaseRedisson.
	SemAcquire = redis.NewScript(`local v = redis.call('get', KEYS[1])
if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then
redis.call('decrby', KEYS[1], ARGV[1])
return 1
end
return 0`)

	// SemReleaseRedisson returns ARGV[1] permits to the counter KEYS[1]
	// and publishes the new count on KEYS[2] (Redisson's release). The new
	// count.
	SemReleaseRedisson = redis.NewScript(`local v = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], v)
return v`)

	// ExpAcquire takes one permit of a Redisson-layout permit-expirable
	// semaphore (RPermitExpirableSemaphore's tryAcquire): KEYS[1] the
	// counter, KEYS[2] the timeout set, KEYS[3] the channel; ARGV[1] the
	// permit ID, ARGV[2] its expiry (epoch ms), ARGV[3] now (epoch ms).
	// Expired permits go back to the pool first. 1 when taken, 0 when not.
	ExpAcquire = redis.NewScript(`local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3])
if #expired > 0 then
redis.call('zrem', KEYS[2], unpack(expired))
local v = redis.call('incrby', KEYS[1], #expired)
redis.call('publish', KEYS[3], v)
end
local v = redis.call('get', KEYS[1])
if v ~= false and tonumber(v) >= 1 then
redis.call('decrby', KEYS[1], 1)
redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
return 1
end
return 0`)

	// ExpRelease releases the permit ARGV[1] of it (RPermitExpirableSemaphore's
	// tryRelease): KEYS as ExpAcquire. 1 when released, 0 when not held.
	ExpRelease = redis.NewScript(`if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then return 0 end
local v = redis.call('incrby', KEYS[1], 1)
redis.call('publish', KEYS[3], v)
return 1`)

	// LatchCountDown counts a Redisson-layout latch down (RCountDownLatch's
	// countDown): KEYS[1] the latch, KEYS[2] its channel. DECR; at or below
	// zero the key is deleted, at zero "0" is published. The new count.
	LatchCountDown = redis.NewScript(`local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call('publish', KEYS[2], '0') end
return v`)
)
