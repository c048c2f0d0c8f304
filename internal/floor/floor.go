// Package floor holds the scripts of the least a Redis lock can do, which
// the benchmarks measure rlock against in the same run: the compare-and-
// delete that releases a SET NX PX lock, and the least a lock in
// Redisson's layout sends (no replay latch, no waiter registry, no client
// bookkeeping). They are for benchmarks only; no lock uses them.
package floor

import "github.com/redis/go-redis/v9"

var (
	// CompareAndDelete releases a SET NX lock: KEYS[1] the lock, ARGV[1]
	// the token. 1 when deleted, 0 when the lock holds another token.
	CompareAndDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

	// RedissonAcquire takes a Redisson-layout lock: KEYS[1] the lock;
	// ARGV[1] the lease (ms), ARGV[2] the owner field. nil when granted,
	// the lock's PTTL when not.
	RedissonAcquire = redis.NewScript(`if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil
end
return redis.call('pttl', KEYS[1])`)

	// RedissonRelease releases one hold of it: KEYS[1] the lock, KEYS[2]
	// its channel; ARGV[1] the message, ARGV[2] the lease (ms), ARGV[3]
	// the owner field. nil when not held, 0 when holds remain, 1 on the
	// last (the key deleted, the message published).
	RedissonRelease = redis.NewScript(`if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
redis.call('pexpire', KEYS[1], ARGV[2])
return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1`)

	// RedissonReleaseOnce is RedissonRelease with exactly-once last
	// releases, the least that guarantee costs: the last release records
	// its request ID in a latch key, reading the record it replaces
	// (SET ... PX ... GET), and a copy of it, re-sent after a lost reply
	// or arriving late after the owner took the lock again, is answered
	// from the record and changes nothing. KEYS[3] the owner's latch;
	// ARGV[4] the request ID, ARGV[5] the latch's lifetime (ms). As
	// RedissonRelease, and 1 for a copy of a release that ran.
	RedissonReleaseOnce = redis.NewScript(`local held = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
if held == 0 then
if redis.call('get', KEYS[3]) == ARGV[4] then return 1 end
return nil
end
if held > 1 then
redis.call('hincrby', KEYS[1], ARGV[3], -1)
redis.call('pexpire', KEYS[1], ARGV[2])
return 0
end
if redis.call('set', KEYS[3], ARGV[4], 'px', ARGV[5], 'get') == ARGV[4] then return 1 end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1`)
)
